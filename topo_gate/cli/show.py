"""``topo-gate show PROFILE``: the profile's decisions as tables, or as JSON (an A/B record too)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from topo_gate.ab.record import looks_like_record
from topo_gate.cli._errors import ExitCode
from topo_gate.cli._profile import load_for_reading, profile_argument


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
    "--json", "as_json", is_flag=True, help="Print the decisions and price tables as JSON instead of tables."
)
def command(profile: Path, as_json: bool) -> None:
    """Render PROFILE: node, software, and per TP size and pattern which backend covers which sizes
    (and, under each, a line on its price table: the sizes and backends measured). An A/B record is
    shown as its arms, runs and verdict."""
    if looks_like_record(profile):
        from topo_gate.cli.ab import show_record

        show_record(profile, as_json=as_json)
        return
    loaded, digest_problem = load_for_reading(profile, invalid_code=ExitCode.NOT_OK)
    if as_json:
        document = {
            "path": str(profile),
            "schema": loaded.schema,
            "fingerprint": loaded.node.fingerprint,
            "digest_ok": digest_problem is None,
            "decisions": [entry.to_dict() for entry in loaded.decisions],
            "measurements": [table.to_dict() for table in loaded.measurements],
        }
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    from rich.console import Console

    from topo_gate.report.tables import profile_view

    Console().print(profile_view(loaded, path=str(profile), digest_problem=digest_problem))
