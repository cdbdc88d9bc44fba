"""``topo-gate capture FILE``: record NVML's raw answers for replay (``--from``) and bug reports."""

from __future__ import annotations

import json
from dataclasses import replace

import click

from topo_gate._atomic import write_atomic
from topo_gate._terminal import shown
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._params import MAX_TIMEOUT_S, Finite
from topo_gate.topology.capture import collect_isolated, save_capture
from topo_gate.topology.errors import NvmlCrash, NvmlUnavailable
from topo_gate.topology.model import build_node


@click.command(
    "capture",
    epilog="""\b
Examples:
  topo-gate capture node.json
  topo-gate topo --from node.json      # replays it anywhere, no GPU needed

Exit codes: 0 ok, 4 no NVIDIA driver, 5 NVML crashed (the answers gathered before the crash are
still written to FILE, marked incomplete), 8 FILE not written (not a regular file, folder
missing or read-only, disk full).""",
)
@click.argument("file", type=click.Path(dir_okay=False, writable=True))
@click.option("--note", help="A line saying what this machine is, stored in the capture.")
@click.option(
    "--timeout",
    "timeout_s",
    type=Finite(min=0, min_open=True, max=MAX_TIMEOUT_S),
    default=60.0,
    show_default=True,
    help="Seconds NVML collection may take.",
)
def command(file: str, note: str | None, timeout_s: float) -> None:
    """Record every NVML answer topo-gate uses (versioned JSON, topo-gate/capture/v1).

    Unknown answers are kept with their reason (not supported, no permission, function not found,
    ...). The file holds UUIDs and the hostname: review before sharing.
    """
    try:
        capture = collect_isolated(timeout_s=timeout_s)
    except NvmlUnavailable as error:
        raise fail(ExitCode.NO_DRIVER, str(error)) from None
    except NvmlCrash as error:
        incomplete = {
            "format": "topo-gate/capture/v1",
            "incomplete": error.query,
            "why": error.why,
            "answers": error.partial,
        }
        write_atomic(file, json.dumps(incomplete, indent=1) + "\n")
        raise fail(
            ExitCode.NVML_CRASH,
            f"{error}; the {len(error.partial)} answers before it are in {file} (incomplete)",
        ) from None
    if note:
        capture = replace(capture, note=note)
    save_capture(capture, file)  # a refused write is OutputRefused: one line, exit 8
    node = build_node(capture)
    click.echo(f"wrote {shown(file)}: {len(node.gpus)} GPU(s), interconnect {node.interconnect}", err=True)
