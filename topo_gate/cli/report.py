"""``topo-gate report``: figures, a self-contained HTML page and a pull-request summary from evidence."""

from __future__ import annotations

import json
from pathlib import Path

import click

from topo_gate._terminal import shown
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._params import Finite
from topo_gate.probe import DecideSettings
from topo_gate.report.ab_report import AbSource, ab_labels
from topo_gate.report.build import FORMATS, needs_matplotlib, write_report
from topo_gate.report.sources import ReportInputError, load_baseline, load_sources


def _formats(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    unknown = [name for name in chosen if name not in FORMATS]
    if unknown or not chosen:
        raise click.BadParameter(f"choose from {','.join(FORMATS)} (comma-separated), got {value!r}")
    return chosen


@click.command(
    "report",
    epilog="""\b
Examples:
  topo-gate report profiles/h200-x2/h7168-run1.evidence.json \\
      profiles/h200-x2/h7168-run2.evidence.json --out r
  topo-gate report node.yaml --out r --baseline old-node.yaml  # what changed
  topo-gate report node-a.evidence.json node-b.evidence.json --out r \\
      --format md
  topo-gate report node.yaml ab.json --out r   # A/B record + its profile
  pip install 'topo-gate[report]'   # matplotlib, for html and png

Writes into DIR: report.html (self-contained: figures embedded, no network), summary.md (for a
pull request), figures/*.png (fixed names, reproducible bytes). Several inputs of one node shape are
overlaid in the same figures, one line style per input. html and png need matplotlib (the
report extra, above); md does not.

Exit codes: 0 written; 1 an invalid or tampered profile or A/B record (one whose verdict,
ratios or values do not follow from its runs); 2 usage, or matplotlib missing for html/png; 3
an input is unreadable or malformed; 8 DIR cannot be written, or a file it would write is an
input.""",
)
@click.argument(
    "inputs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="EVIDENCE_PROFILE_OR_AB..."
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Folder to write into.")
@click.option(
    "--format",
    "formats",
    default=",".join(FORMATS),
    show_default=True,
    callback=_formats,
    help="Comma-separated outputs: html, png, md.",
)
@click.option(
    "--baseline",
    type=click.Path(path_type=Path),
    metavar="OLD_PROFILE",
    help="Say what changed since this profile.",
)
@click.option(
    "--margin",
    type=Finite(min=0),
    default=DecideSettings().margin,
    show_default=True,
    help="For evidence inputs: the margin their decisions are re-derived with (profiles keep theirs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def command(
    inputs: tuple[Path, ...],
    out: Path,
    formats: tuple[str, ...],
    baseline: Path | None,
    margin: float,
    as_json: bool,
) -> None:
    """Render evidence or profiles as figures, report.html and summary.md.

    Per TP size, GPU-group class and pattern: latency vs message size (log-log, a line per backend
    with its 95% CI band, NCCL heavier, each chosen range shaded and labelled with its backend and
    speed-up) and speed-up vs NCCL with the margin line and the cells that could not be measured,
    with why; in-context and size-transition figures when the evidence has those measurements.
    An A/B record (topo-gate ab --out) adds its arms' samples, ratios and verdict, next to the
    profile it validated when that profile is an input too.
    """
    if out.exists() and not out.is_dir():  # checked here, not by click: an output not written is exit 8
        raise fail(
            ExitCode.UNWRITABLE,
            f"{out}: refusing to write: it is not a folder (--out names the folder to write into)",
        )
    if needs_matplotlib(formats):
        from topo_gate.report.render import MissingExtra, require_matplotlib

        try:
            require_matplotlib()
        except MissingExtra as missing:
            raise fail(ExitCode.USAGE, str(missing)) from None
    records, others = _split_ab_records(inputs)
    try:
        sources = load_sources(others, DecideSettings(margin=margin))
        old = None if baseline is None else (str(baseline), load_baseline(baseline))
    except ReportInputError as error:
        raise fail(ExitCode.UNREADABLE, str(error)) from None
    try:
        result = write_report(
            sources, out, formats=formats, baseline=old, ab_records=records, inputs=[("--baseline", baseline)]
        )
    except OSError as error:
        raise fail(ExitCode.UNWRITABLE, f"{out}: cannot write: {error.strerror or error}") from None
    if as_json:
        document = {
            "out": str(out),
            "files": [str(path) for path in result.files],
            "figures": [
                {"name": spec.name, "kind": spec.kind, "title": spec.title, "backends": spec.backends}
                for spec in result.figures
            ],
            "notes": result.notes + [f"{s.label}: {note}" for s in sources for note in s.notes],
        }
        click.echo(json.dumps(document, allow_nan=False, indent=2))
        return
    for path in result.files:
        click.echo(f"wrote {shown(path)}")
    for note in result.notes + [f"{s.label}: {note}" for s in sources for note in s.notes]:
        click.echo(f"note: {shown(note)}", err=True)


def _split_ab_records(inputs: tuple[Path, ...]) -> tuple[list[AbSource], list[Path]]:
    """The A/B records among the inputs (loaded, checked, untampered: else exit 3 unreadable, 1
    invalid or tampered, as for ``show``) and the rest."""
    from topo_gate.ab.record import looks_like_record
    from topo_gate.cli.ab import load_record_or_fail

    paths = [path for path in inputs if looks_like_record(path)]
    records = [
        AbSource(label, path, load_record_or_fail(path))
        for path, label in zip(paths, ab_labels(paths), strict=True)
    ]
    return records, [path for path in inputs if path not in paths]
