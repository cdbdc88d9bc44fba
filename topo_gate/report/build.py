"""``topo-gate report``'s job: inputs -> figure specs -> PNGs, ``report.html``, ``summary.md`` in a folder.

File names are fixed (``report.html``, ``summary.md``, ``figures/<kind>-tp<N>-<class>-<pattern>.png``),
so a report re-made into the same folder replaces its files and a committed report diffs by figure.
Each file is written atomically.  matplotlib is checked before anything is written: a missing extra
leaves the folder as it was.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from topo_gate._atomic import Labelled, refuse_clobbering, write_atomic
from topo_gate.launchers.outlook import Outlooks, outlooks
from topo_gate.profile.schema import Profile
from topo_gate.report.ab_report import AbSource, ab_figure_spec
from topo_gate.report.changes import changes
from topo_gate.report.figures import FigureSpec, figure_specs
from topo_gate.report.html_page import report_html
from topo_gate.report.markdown import summary_markdown
from topo_gate.report.sources import Source

FORMATS = ("html", "png", "md")
FIGURES_DIR = "figures"
HTML_NAME = "report.html"
SUMMARY_NAME = "summary.md"


@dataclass(frozen=True)
class ReportResult:
    files: list[Path]
    figures: list[FigureSpec]
    notes: list[str] = field(default_factory=list)


def needs_matplotlib(formats: Collection[str]) -> bool:
    return bool({"html", "png"} & set(formats))


def write_report(
    sources: Sequence[Source],
    out: Path,
    *,
    formats: Collection[str] = FORMATS,
    baseline: tuple[str, Profile] | None = None,
    ab_records: Sequence[AbSource] = (),
    inputs: Sequence[Labelled] = (),
) -> ReportResult:
    """Write the requested formats for ``sources`` and the A/B records into ``out`` (created if missing).

    ``OutputRefused`` before anything is written when a file it would write is one it read: an input,
    the evidence a profile input names, an A/B record, or one of ``inputs`` (the baseline)."""
    specs, notes = figure_specs(sources)
    ab_specs = [(record.label, ab_figure_spec(record)) for record in ab_records]
    rendered: list[tuple[FigureSpec, bytes]] = []
    ab_pngs: dict[str, bytes] = {}
    if needs_matplotlib(formats):
        from topo_gate.report.render import render_ab_png, render_png, require_matplotlib

        require_matplotlib()
        rendered = [(spec, render_png(spec)) for spec in specs]
        ab_pngs = {label: render_ab_png(spec) for label, spec in ab_specs}
    launchers = _same_outlooks([(source.label, outlooks(source.profile)) for source in sources])
    compared = None
    if baseline is not None:
        label, old = baseline
        compared = (label, [changes(old, source.profile) for source in sources])
    figure_names = [spec.name for spec, _ in rendered] + [spec.name for _, spec in ab_specs if ab_pngs]
    planned = [(f"{FIGURES_DIR}/{name}.png", out / FIGURES_DIR / f"{name}.png") for name in figure_names]
    planned = (planned if "png" in formats else []) + [
        (name, out / name) for name, fmt in ((HTML_NAME, "html"), (SUMMARY_NAME, "md")) if fmt in formats
    ]
    records: list[Labelled] = [("A/B record", record.path) for record in ab_records]
    refuse_clobbering([("--out", path) for _, path in planned], [*_read_files(sources), *records, *inputs])
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    figure_links: list[tuple[str, str]] = []
    if "png" in formats:
        (out / FIGURES_DIR).mkdir(exist_ok=True)
        for spec, png in rendered:
            written.append(write_atomic(out / FIGURES_DIR / f"{spec.name}.png", png))
            figure_links.append((spec.title, f"{FIGURES_DIR}/{spec.name}.png"))
        for label, ab_spec in ab_specs:
            written.append(write_atomic(out / FIGURES_DIR / f"{ab_spec.name}.png", ab_pngs[label]))
    ab_links = {label: f"{FIGURES_DIR}/{ab_spec.name}.png" for label, ab_spec in ab_specs if "png" in formats}
    if "html" in formats:
        page = report_html(
            sources, rendered, notes=notes, baseline=compared, ab=(ab_records, ab_pngs), launchers=launchers
        )
        written.append(write_atomic(out / HTML_NAME, page))
    if "md" in formats:
        text = summary_markdown(
            sources,
            figures=figure_links,
            notes=notes,
            baseline=compared,
            ab=(ab_records, ab_links),
            launchers=launchers,
        )
        written.append(write_atomic(out / SUMMARY_NAME, text))
    return ReportResult(written, specs, notes)


def _same_outlooks(found: Sequence[tuple[str, Outlooks]]) -> list[tuple[str, Outlooks]]:
    """Inputs whose launchers would all do the same (two runs of one node) share one outlook."""
    merged: list[tuple[list[str], Outlooks]] = []
    for label, outlook in found:
        same = next((labels for labels, theirs in merged if theirs == outlook), None)
        if same is None:
            merged.append(([label], outlook))
        else:
            same.append(label)
    return [(", ".join(labels), outlook) for labels, outlook in merged]


def _read_files(sources: Sequence[Source]) -> list[Labelled]:
    """Every file the sources were read from: the inputs and the evidence a profile input names."""
    files: list[Labelled] = [("EVIDENCE_OR_PROFILE", source.path) for source in sources]
    for source in sources:
        reference = source.profile.evidence
        if source.kind == "profile" and reference is not None:
            files.append((f"the evidence {source.path} names", source.path.parent / reference.path))
    return files
