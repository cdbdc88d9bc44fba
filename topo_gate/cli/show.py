"""``topo-gate show PROFILE``: the profile's decisions as tables, or as JSON (an A/B record too)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from topo_gate.ab.record import looks_like_record
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._profile import load_for_reading, profile_argument
from topo_gate.launchers.outlook import outlooks
from topo_gate.models import UnknownModel
from topo_gate.profile.schema import Profile


@click.command(
    "show",
    epilog="""\b
Examples:
  topo-gate show node.yaml
  topo-gate show node.yaml --json | jq '.decisions[] | select(.tp == 4)'
  topo-gate show ab.json   # an A/B record (topo-gate ab --out)

A profile whose digest does not match is shown with a warning (launchers ignore it); an A/B
record whose digest does not match is refused. Exit codes: 0 shown; 1 invalid or tampered
record; 3 unreadable.""",
)
@profile_argument
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the decisions, price tables and what each launcher will do as JSON instead of tables.",
)
@click.option(
    "--model",
    help="The served model (a probe preset, e.g. llama-3-70b) for what each launcher will do. Default: "
    "each preset of the profile's hidden size.",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Each range's whole reason and the other backends faster than NCCL there (default: the "
    "reason's first clause).",
)
def command(profile: Path, as_json: bool, model: str | None, verbose: bool) -> None:
    """Render PROFILE: node, software, and per TP size and pattern which backend covers which sizes
    vs NCCL (and, under each, a line on its price table: the sizes and backends measured); then what
    each launcher will do with it on a node like the profiled one: its default path per size range,
    the plan against that default, and what would give a plan where nothing changes. An A/B record
    is shown as its arms, runs and verdict."""
    if looks_like_record(profile):
        from topo_gate.cli.ab import show_record

        show_record(profile, as_json=as_json)
        return
    loaded, digest_problem = load_for_reading(profile, invalid_code=ExitCode.NOT_OK)
    try:
        outlook = outlooks(loaded, model=model)
    except UnknownModel as error:
        raise fail(ExitCode.USAGE, str(error)) from None
    if as_json:
        document = {
            "path": str(profile),
            "schema": loaded.schema,
            "fingerprint": loaded.node.fingerprint,
            "digest_ok": digest_problem is None,
            "decisions": [entry.to_dict() for entry in loaded.decisions],
            "measurements": [table.to_dict() for table in loaded.measurements],
            "launchers": asdict(outlook),
        }
        click.echo(json.dumps(document, allow_nan=False, indent=2, ensure_ascii=False))
        return
    from rich.console import Console

    from topo_gate.report.outlook import terminal
    from topo_gate.report.tables import profile_view

    console = Console()
    measured = measured_at(loaded, profile)
    console.print(
        profile_view(
            loaded, path=str(profile), digest_problem=digest_problem, verbose=verbose, measured=measured
        )
    )
    console.print()
    console.print(terminal(outlook, console.width))


def measured_at(loaded: Profile, path: Path) -> str | None:
    """When the profile's evidence was measured: its ``created``, read from the evidence file the
    profile names beside it when that file is there and matches the recorded digest; None otherwise
    (a profile without its evidence is dated by its own ``created`` alone)."""
    import hashlib

    from topo_gate._inputs import InputError, parse_json, read_text
    from topo_gate.evidence.document import MAX_EVIDENCE_BYTES

    reference = loaded.evidence
    if reference is None or reference.digest is None:
        return None
    try:
        text = read_text(path.parent / reference.path, limit=MAX_EVIDENCE_BYTES, what="an evidence file")
    except (InputError, OSError):
        return None
    if "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest() != reference.digest:
        return None
    try:
        data = parse_json(text)
    except InputError:
        return None
    created = data.get("created") if isinstance(data, dict) else None
    return created if isinstance(created, str) else None
