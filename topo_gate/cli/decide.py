"""``topo-gate decide``: re-derive a profile offline from recorded evidence (no GPU, no trials)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from topo_gate._atomic import refuse_clobbering
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._params import MAX_BOOTSTRAP, Finite
from topo_gate.evidence.document import EvidenceError
from topo_gate.probe import DecideSettings, preview, replay
from topo_gate.profile.errors import ProfileError
from topo_gate.report.summary import summary
from topo_gate.topology.errors import CaptureError


@click.command(
    "decide",
    epilog="""\b
Examples:
  topo-gate decide evidence.json    # show what the evidence implies
  topo-gate decide evidence.json --margin 0.10 --out strict.yaml
  topo-gate decide evidence.json --json | jq '.decisions[].rules'

Without --out nothing is written. Exit codes: 0 ok, 2 usage, 3 unreadable or malformed
evidence, 8 --out not written (or it is EVIDENCE itself).""",
)
@click.argument("evidence", type=click.Path(path_type=Path))
@click.option(
    "--margin",
    type=Finite(min=0),
    default=0.05,
    show_default=True,
    help="A backend must beat NCCL by this fraction, with its CI clear of it.",
)
@click.option("--ci-level", type=Finite(min=0.5, max=0.999), default=0.95, show_default=True)
@click.option(
    "--bootstrap",
    type=click.IntRange(min=100, max=MAX_BOOTSTRAP),
    default=2000,
    show_default=True,
    help="Bootstrap resamples per (backend, size).",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the profile here.")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON instead of tables.")
def command(
    evidence: Path, margin: float, ci_level: float, bootstrap: int, out: Path | None, as_json: bool
) -> None:
    """Re-derive a profile offline from recorded evidence.

    The decision is a pure function of the evidence: the same file and options give the same
    profile on any machine. Use it to try another margin, or to apply a newer topo-gate's decision
    rules to old measurements.
    """
    settings = DecideSettings(margin=margin, ci_level=ci_level, bootstrap=bootstrap)
    refuse_clobbering([("--out", out)], [("EVIDENCE", evidence)])
    try:
        result = replay(evidence, out=out, settings=settings) if out else preview(evidence, settings=settings)
    except (EvidenceError, CaptureError) as error:
        raise fail(ExitCode.UNREADABLE, str(error)) from None
    except ProfileError as error:  # evidence that parses but implies no valid profile
        raise fail(ExitCode.UNREADABLE, f"{evidence}: the profile it implies is invalid: {error}") from None
    if as_json:
        click.echo(json.dumps({**result.profile.to_dict(), "notes": result.notes}, allow_nan=False, indent=1))
        return
    written = str(result.profile_path) if out else None
    Console().print(
        summary(result.profile, profile_path=written, evidence_path=str(evidence), notes=result.notes)
    )
