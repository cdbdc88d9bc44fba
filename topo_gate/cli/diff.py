"""``topo-gate diff A B``: which message-size ranges changed backend between two profiles."""

from __future__ import annotations

import json
from pathlib import Path

import click

from topo_gate._terminal import shown
from topo_gate.cli._errors import ExitCode
from topo_gate.cli._profile import load_for_reading
from topo_gate.profile.compare import BackendChange, PriceChange, diff_decisions, diff_measurements


@click.command(
    "diff",
    epilog="""\b
Examples:
  topo-gate diff old.yaml new.yaml
  topo-gate diff old.yaml new.yaml --json

Price tables (schema v1.3) are summarised after the decisions: backends and sizes added or
removed, cells whose CIs no longer overlap, the largest move of a median; they do not change the
exit code. Exit codes: 0 same decisions; 1 some size range changed backend; 3 a profile cannot be
read or is invalid. A digest mismatch is reported on stderr but does not stop the comparison.""",
)
@click.argument("before", type=click.Path(path_type=Path), metavar="A")
@click.argument("after", type=click.Path(path_type=Path), metavar="B")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
def command(before: Path, after: Path, as_json: bool) -> None:
    """Compare the decisions of profiles A and B, per TP size, pattern and GPU-group class, and
    summarise how their price tables moved."""
    # Exit 1 means "different" here, so an invalid profile exits 3 rather than 1.
    profile_a, problem_a = load_for_reading(before, invalid_code=ExitCode.UNREADABLE)
    profile_b, problem_b = load_for_reading(after, invalid_code=ExitCode.UNREADABLE)
    for path, problem in ((before, problem_a), (after, problem_b)):
        if problem:
            click.echo(f"topo-gate: warning: {shown(path)}: {shown(problem)}", err=True)
    changes = diff_decisions(profile_a, profile_b)
    prices = diff_measurements(profile_a, profile_b)
    same_node = profile_a.node.fingerprint == profile_b.node.fingerprint
    if as_json:
        document = {
            "before": str(before),
            "after": str(after),
            "same_node_class": same_node,
            "same_decisions": not changes,
            "changes": [change.to_dict() for change in changes],
            "measurement_changes": [change.to_dict() for change in prices],
        }
        click.echo(json.dumps(document, allow_nan=False, indent=2))
    else:
        _print_changes(changes, prices, before, after, same_node)
    if changes:
        # Not an error, so no error line: like `diff`, exit 1 just means "they differ".
        click.get_current_context().exit(int(ExitCode.NOT_OK))


def _print_changes(
    changes: list[BackendChange], prices: list[PriceChange], before: Path, after: Path, same_node: bool
) -> None:
    from rich.console import Console
    from rich.text import Text

    from topo_gate.report.tables import diff_table, price_changes_lines

    console = Console()
    if not same_node:
        console.print(
            "[yellow]The profiles were measured on different node classes (fingerprints differ).[/]"
        )
    if not changes:
        same = f"Same decisions: {shown(before)} and {shown(after)} choose the same backend at every size."
        console.print(Text(same))
    else:
        console.print(diff_table(changes, before=str(before), after=str(after)))
    for line in price_changes_lines(prices):
        console.print(Text(line, style="dim"))
