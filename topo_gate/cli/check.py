"""``topo-gate check``: does this node match a profile? Hardware decides; software drift warns."""

from __future__ import annotations

import json
from pathlib import Path

import click

from topo_gate._terminal import shown
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._profile import load_or_fail, profile_argument
from topo_gate.cli.topo import read_node_or_fail
from topo_gate.probe import NodeMatch, cpu_node, facts_from_topology, match_node

MAX_SHOWN = 3  # hardware differences in the one-line error


@click.command(
    "check",
    epilog="""\b
Examples:
  topo-gate check node.yaml             # before deploying a profile on a node
  topo-gate check node.yaml --strict    # startup gate: drift is an error too
  topo-gate check profiles/h200-x2/h7168-run1.yaml \\
    --from profiles/h200-x2/h200-x2.capture.json --json

Exit codes: 0 the node matches (drift only warned), 1 hardware differs, 3 unreadable profile or
capture, 4 no NVIDIA driver (use --from), 5 NVML crashed, 7 software drift under --strict.""",
)
@profile_argument
@click.option(
    "--strict", is_flag=True, help="Software drift (driver, CUDA, torch, NCCL, FlashInfer) is an error."
)
@click.option("--from", "from_path", metavar="CAPTURE", help="Check a recorded capture instead of this node.")
@click.option("--json", "as_json", is_flag=True, help="Print {match, hardware, drift, reason} as JSON.")
def command(profile: Path, strict: bool, from_path: str | None, as_json: bool) -> None:
    """Does this node match the profile? Exit 0 if it does.

    The node class fingerprint (GPU models, SM, links, P2P, PCIe, MIG, fabric) must equal the
    profile's: a profile measured elsewhere says nothing about this node. Software versions that
    moved since the probe are reported; they fail the check only under --strict.
    """
    loaded = load_or_fail(profile)
    if loaded.node.hardware.get("device") == "cpu" and from_path is None:
        facts = cpu_node(loaded.trials.tp)  # a CPU-harness profile is checked against this CPU
    else:
        facts = facts_from_topology(read_node_or_fail(from_path), command=None)
    verdict = match_node(loaded, facts)
    code, reason = _outcome(verdict, strict)
    if as_json:
        click.echo(json.dumps(_as_json(verdict, code, reason), allow_nan=False, indent=1))
    elif code == ExitCode.OK:
        click.echo(f"ok: {shown(reason)}")
        for line in verdict.drift:
            click.echo(f"topo-gate: warning: software drift: {shown(line)}", err=True)
    if code != ExitCode.OK:
        if as_json:  # the JSON already says why; only the exit code remains to be given
            click.get_current_context().exit(int(code))
        raise fail(code, reason)


def _outcome(verdict: NodeMatch, strict: bool) -> tuple[ExitCode, str]:
    if not verdict.hardware_match:
        shown = verdict.differences[:MAX_SHOWN]
        more = len(verdict.differences) - len(shown)
        listed = "; ".join(shown) + (f"; and {more} more (--json lists all)" if more > 0 else "")
        return ExitCode.NOT_OK, f"node does not match the profile: {listed}"
    if verdict.drift and strict:
        return ExitCode.DRIFT, "software drift under --strict: " + "; ".join(verdict.drift)
    drift = f" (software drift: {'; '.join(verdict.drift)})" if verdict.drift else ""
    return ExitCode.OK, f"node matches the profile ({verdict.current_fingerprint[:19]}...){drift}"


def _as_json(verdict: NodeMatch, code: ExitCode, reason: str) -> dict[str, object]:
    return {
        "match": code == ExitCode.OK,
        "hardware": {
            "match": verdict.hardware_match,
            "profile": verdict.recorded_fingerprint,
            "node": verdict.current_fingerprint,
            "differences": verdict.differences,
        },
        "drift": verdict.drift,
        "reason": reason,
    }
