"""``topo-gate topo``: show the node (GPUs, links, P2P, classes, TP groups), live or from a capture."""

from __future__ import annotations

import json

import click

from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._hints import CAPTURE_HINT
from topo_gate.cli._params import MAX_TIMEOUT_S, Finite
from topo_gate.topology.capture import Capture, read_capture
from topo_gate.topology.errors import CaptureError, NvmlCrash, NvmlUnavailable
from topo_gate.topology.model import Node, build_node


def read_capture_or_fail(from_path: str | None, timeout_s: float = 60) -> Capture:
    """The capture behind every topology-reading command: ``--from FILE``, or NVML on this machine.

    Turns each failure into the CLI's one-line error with its exit code (3 unreadable capture,
    4 no driver, 5 NVML crashed).
    """
    try:
        return read_capture(from_path, timeout_s=timeout_s)
    except CaptureError as error:
        raise fail(ExitCode.UNREADABLE, str(error)) from None
    except NvmlUnavailable as error:
        raise fail(ExitCode.NO_DRIVER, f"{error}; {CAPTURE_HINT}") from None
    except NvmlCrash as error:
        raise fail(
            ExitCode.NVML_CRASH,
            f"{error}; {len(error.partial)} queries answered before it "
            "(`topo-gate capture FILE` saves them for a bug report)",
        ) from None


def read_node_or_fail(from_path: str | None, timeout_s: float = 60) -> Node:
    capture = read_capture_or_fail(from_path, timeout_s)
    try:
        return build_node(capture)
    except ValueError as error:
        raise fail(ExitCode.UNREADABLE, f"{from_path or 'collected capture'}: {error}") from None


@click.command(
    "topo",
    epilog="""\b
Examples:
  topo-gate topo                        # this node, through NVML
  topo-gate topo --from profiles/h200-x2/h200-x2.capture.json  # recorded
  topo-gate topo --json | jq .interconnect

Exit codes: 0 ok, 3 unreadable capture, 4 no NVIDIA driver, 5 NVML crashed.""",
)
@click.option(
    "--from", "from_path", metavar="CAPTURE", help="Read a capture (topo-gate capture) instead of NVML."
)
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON (includes the raw capture).")
@click.option(
    "--timeout",
    "timeout_s",
    type=Finite(min=0, min_open=True, max=MAX_TIMEOUT_S),
    default=60.0,
    show_default=True,
    help="Seconds NVML collection may take.",
)
def command(from_path: str | None, as_json: bool, timeout_s: float) -> None:
    """Show the GPUs, NVLink/PCIe links, P2P status, pair and node classes, and TP groups.

    Like `nvidia-smi topo -m`, plus what topo-gate decides from it: each pair's class (nvswitch,
    nvlink, pix, pxb, phb, node, sys, no-p2p), the node's interconnect class with the facts it rests
    on, and the GPU groups a launcher would use at each TP size.
    """
    from topo_gate.report.topology import node_report, render_node

    node = read_node_or_fail(from_path, timeout_s)
    if as_json:
        click.echo(json.dumps(node_report(node, from_path), allow_nan=False, indent=1))
        return
    from rich.console import Console

    render_node(node, from_path, Console())
