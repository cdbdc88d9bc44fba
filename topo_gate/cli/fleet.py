"""``topo-gate fleet merge`` / ``fleet outliers``: evidence from many nodes of one class."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from topo_gate._atomic import refuse_clobbering
from topo_gate._terminal import shown
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._params import MAX_BOOTSTRAP, Finite
from topo_gate.fleet.evidence_set import FleetError, NodeEvidence, load_fleet
from topo_gate.fleet.outliers import DEFAULT_NOISE_FLOOR, DEFAULT_THRESHOLD, find_outliers
from topo_gate.probe import DecideSettings
from topo_gate.profile import dump_profile
from topo_gate.profile.errors import ProfileError

_EVIDENCE = click.argument("evidence", nargs=-1, required=True, type=click.Path(path_type=Path))


def _load(paths: tuple[Path, ...]) -> list[NodeEvidence]:
    try:
        return load_fleet(paths)
    except FleetError as error:
        raise fail(ExitCode.UNREADABLE if error.unreadable else ExitCode.NOT_OK, str(error)) from None


@click.group(
    "fleet",
    epilog="""Exit codes: 0 ok (merge: profile written; outliers: no outlier); 1 refused evidence
(another fingerprint or trial shape, a node twice), or an outlier node (outliers); 2 usage;
3 unreadable evidence; 8 (merge) the profile could not be written.""",
)
def command() -> None:
    """Evidence from many nodes of one class: one profile for all, and the nodes unlike their twins.

    Name each node's evidence after its host (NODE.evidence.json): that name is the node's.
    Every command refuses, by name, evidence of another node class (fingerprint) or trial shape,
    two files for one node name, the same evidence or the same GPUs twice.
    """


@command.command(
    "merge",
    epilog="""\b
Examples:
  topo-gate fleet merge evidence/*.evidence.json --out profiles/h200-x8.yaml
  topo-gate fleet merge evidence/*.evidence.json --out p.yaml \\
      --margin 0.10 --json

Method (per-node bar): at each TP, pattern and size, a backend replaces NCCL only where it cleared
the margin (median and CI low end) on EVERY node, judged on each node as `decide` judges one; the
rule states its weakest node. A size some node did not measure stays NCCL. The profile records the
nodes (name, hostname, evidence digest) and how many under `fleet:` (schema v1.2).

Exit codes: 0 written, 1 refused (other fingerprint, shape, a node twice), 2 usage, 3 unreadable,
8 the profile could not be written (or --out is one of the EVIDENCE files).""",
)
@_EVIDENCE
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Profile to write."
)
@click.option("--margin", type=Finite(min=0), default=0.05, show_default=True, help="The bar per node.")
@click.option("--ci-level", type=Finite(min=0.5, max=0.999), default=0.95, show_default=True)
@click.option("--bootstrap", type=click.IntRange(min=100, max=MAX_BOOTSTRAP), default=2000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the written profile and notes as JSON.")
def merge_command(
    evidence: tuple[Path, ...], out: Path, margin: float, ci_level: float, bootstrap: int, as_json: bool
) -> None:
    """Merge EVIDENCE files of N nodes of one class into one profile whose rules hold on every node."""
    from topo_gate.fleet.merge import merge_fleet

    refuse_clobbering([("--out", out)], [("EVIDENCE", path) for path in evidence])
    nodes = _load(evidence)
    settings = DecideSettings(margin=margin, ci_level=ci_level, bootstrap=bootstrap)
    command_line = shlex.join(["topo-gate", *sys.argv[1:]]) if sys.argv else None
    try:
        result = merge_fleet(nodes, out=out, settings=settings, command=command_line)
    except ProfileError as error:  # evidence that loads but implies no valid profile
        names = ", ".join(str(path) for path in evidence)
        raise fail(ExitCode.UNREADABLE, f"{names}: the profile they imply is invalid: {error}") from None
    dump_profile(result.profile, out)
    for note in result.notes:
        click.echo(f"topo-gate: note: {shown(note)}", err=True)
    if as_json:
        sealed = result.profile.with_digest()
        click.echo(json.dumps({**sealed.to_dict(), "notes": result.notes}, allow_nan=False, indent=1))
        return
    names = ", ".join(node.name for node in nodes)
    click.echo(
        f"wrote {shown(out)}: {len(result.profile.decisions)} decisions held on all {len(nodes)} nodes "
        f"({shown(names)})"
    )


@command.command(
    "outliers",
    epilog=f"""\b
Examples:
  topo-gate fleet outliers evidence/*.evidence.json
  topo-gate fleet outliers evidence/*.evidence.json --json | jq '.outliers'

Per (TP, pattern, backend, size) cell: z = (node median - fleet median) / max(1.4826*MAD,
floor*fleet median), over the nodes that measured it (at least 3). A node beyond +-threshold in any
cell is `slower` or `faster`; one whose backend failed, was wrong or unavailable where most others
measured it is `error`; else `pass`, or `no data` when no cell had 3 nodes. Defaults: threshold
{DEFAULT_THRESHOLD}, floor {DEFAULT_NOISE_FLOOR} (the run-to-run spread of one node; docs/fleet.md).

Exit codes: 0 no outlier, 1 an outlier (or refused evidence), 2 usage, 3 unreadable.""",
)
@_EVIDENCE
@click.option("--threshold", type=Finite(min=0, min_open=True), default=DEFAULT_THRESHOLD, show_default=True)
@click.option(
    "--noise-floor",
    type=Finite(min=0),
    default=DEFAULT_NOISE_FLOOR,
    show_default=True,
    help="Smallest scale, as a fraction of the fleet median: below it differences are noise.",
)
@click.option("--json", "as_json", is_flag=True, help="Verdicts and flagged cells as JSON.")
def outliers_command(evidence: tuple[Path, ...], threshold: float, noise_floor: float, as_json: bool) -> None:
    """List the nodes whose latencies stand apart from their twins', with the cells that flag them."""
    report = find_outliers(_load(evidence), threshold=threshold, noise_floor=noise_floor)
    for warning in report.warnings:
        click.echo(f"topo-gate: warning: {shown(warning)}", err=True)
    if as_json:
        click.echo(json.dumps(report.to_dict(), allow_nan=False, indent=1))
    else:
        for node in report.nodes:
            click.echo(f"{shown(node.name)}: {node.verdict} ({node.scored} cells scored)")
            for flag in node.flags:
                click.echo(f"  {shown(flag.words())}")
    if report.outliers:
        names = ", ".join(f"{node.name} ({node.verdict})" for node in report.outliers)
        raise fail(ExitCode.NOT_OK, f"outlier node(s): {names}")
