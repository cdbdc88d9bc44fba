"""``topo-gate probe``: measure this node and write a gating profile (or replay recorded evidence)."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from topo_gate._atomic import refuse_clobbering
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli._hints import REPLAY_HINT
from topo_gate.cli._params import bounded, int_list
from topo_gate.evidence.document import EvidenceError
from topo_gate.launchers.outlook import outlooks
from topo_gate.launchers.routes.buffer_caps import buffer_caps
from topo_gate.launchers.routes.defaults import default_paths, default_routes
from topo_gate.models import UnknownModel, lookup_model
from topo_gate.probe import (
    BudgetTooSmall,
    DecideSettings,
    NothingToProbe,
    PlanFailed,
    ProbeOptions,
    ProbeResult,
    TrialsFailed,
    probe,
    replay,
)
from topo_gate.probe.activity import GpuBusy
from topo_gate.profile.errors import ProfileError
from topo_gate.profile.schema import PATTERNS
from topo_gate.report.preflight import preflight_view
from topo_gate.report.progress import ProbeProgressDisplay
from topo_gate.report.summary import summary
from topo_gate.report.text import file_text
from topo_gate.topology.errors import CaptureError, NvmlCrash, NvmlUnavailable

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _int_list(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    return int_list("tp", value, "2,4,8")


def _patterns(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in value.split(",") if part.strip())
    unknown = [p for p in chosen if p not in PATTERNS]
    if unknown or not chosen:
        raise click.BadParameter(f"patterns are {', '.join(PATTERNS)}; got {value!r}")
    return chosen


@click.command(
    "probe",
    epilog="""\b
Examples:
  # on a GPU node
  topo-gate probe --tp 2,4,8 --model llama-3-70b --out node.yaml
  # no GPU: replay real evidence
  topo-gate probe --replay profiles/h200-x2/h7168-run1.evidence.json
  # the gloo harness, for demos and CI
  topo-gate probe --device cpu --tp 2 --hidden 1024 --max-tokens 64

Writes the evidence (raw samples) first, then the profile that points at it, both atomically.
TP sizes larger than the node are skipped, with the reason in the profile.

Exit codes: 0 ok, 1 the measurements imply a profile the loader would refuse (the evidence is
kept), 2 usage (bad option, unknown model, budget too small, options that contradict each
other), 3 unreadable capture or evidence, 4 no NVIDIA driver, 5 NVML crashed,
6 no trial could run, 8 output not written (not a regular file, folder missing or read-only,
disk full, another probe writing the same --out), 130 interrupted.""",
)
@click.option(
    "--tp", "tps", default="2,4,8", show_default=True, callback=_int_list, help="TP sizes to probe."
)
@click.option(
    "--hidden", type=click.IntRange(min=1), help="Model hidden size (message = tokens x hidden x dtype)."
)
@click.option("--model", help="A model preset for --hidden, e.g. llama-3-70b, deepseek-v3, qwen3-32b.")
@click.option(
    "--dtype", type=click.Choice(list(DTYPES)), default=None, help="Activation dtype [default: bf16]."
)
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default="profile.yaml", show_default=True
)
@click.option(
    "--evidence",
    "evidence_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the evidence [default: evidence-<UTC time>-<pid>.json beside --out].",
)
@click.option(
    "--budget",
    "budget_s",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="Fit the trials into this time: fewer rounds (>= 15), transitions after the largest size "
    "only, then fewer large sizes, or refuse; what is left out is named in the summary and evidence.",
)
@click.option(
    "--from",
    "capture",
    type=click.Path(path_type=Path),
    metavar="CAPTURE",
    help="Plan from a recorded capture instead of asking NVML.",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu"]),
    default="cuda",
    show_default=True,
    help="cpu: the gloo harness (CPU-labelled profile, never valid for a GPU node).",
)
@click.option("--patterns", default=",".join(PATTERNS), show_default=True, callback=_patterns)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=8192,
    show_default=True,
    help="Largest message in tokens; sizes are powers of two up to it.",
)
@click.option("--rounds", type=bounded("rounds"), default=15, show_default=True)
@click.option(
    "--margin",
    type=click.FloatRange(min=0),
    default=0.05,
    show_default=True,
    help="A backend must beat NCCL by this fraction, CI included.",
)
@click.option(
    "--allow-multicast", is_flag=True, help="Allow NVLink multicast backends (off: never harm a shared node)."
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="If a plan fails twice (not a backend: start-up, rendezvous), still write the profile, "
    "recording that plan as failed. Without it the probe exits 6 and writes no profile.",
)
@click.option(
    "--allow-busy",
    is_flag=True,
    help="Measure even on GPUs running something else (a compute process, or utilisation >= 10%): "
    "their load spoils the timings. Without it such a probe exits 6. Recorded in the evidence.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(path_type=Path),
    metavar="EVIDENCE",
    help="No trials: rebuild the profile from recorded evidence (e.g. the bundled H200 runs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of tables.")
def command(
    tps: tuple[int, ...],
    hidden: int | None,
    model: str | None,
    dtype: str | None,
    out: Path,
    evidence_out: Path | None,
    budget_s: float | None,
    capture: Path | None,
    device: str,
    patterns: tuple[str, ...],
    max_tokens: int,
    rounds: int,
    margin: float,
    allow_multicast: bool,
    allow_partial: bool,
    allow_busy: bool,
    replay_path: Path | None,
    as_json: bool,
) -> None:
    """Measure all-reduce backends on this node and write a gating profile.

    For each TP size, one worker group runs NCCL and every admitted fast path (TRT-LLM one/two-shot,
    fused all-reduce+RMSNorm, symm-mem, custom AR, PCIe IPC) at decode-to-prefill message sizes, for
    every pattern; a backend is enabled only where it was correct and faster than NCCL by the margin,
    in layer-like graphs too (which also time each launcher's default path).
    """
    console = Console(stderr=as_json)
    refuse_clobbering(
        [("--out", out), ("--evidence", evidence_out)], [("--replay", replay_path), ("--from", capture)]
    )
    settings = DecideSettings(margin=margin)
    _refuse_ignored_capture(capture, device, replay_path)
    if replay_path is not None:
        result = _replay_or_fail(replay_path, out, settings)
    else:
        options = ProbeOptions(
            out=out,
            hidden=_hidden(hidden, model),
            tps=tps,
            dtype=DTYPES[dtype or "bf16"],
            patterns=patterns,
            device=device,
            evidence_out=evidence_out,
            capture=capture,
            budget_s=budget_s,
            rounds=rounds,
            max_tokens=max_tokens,
            allow_multicast=allow_multicast,
            allow_partial=allow_partial,
            allow_busy=allow_busy,
            default_paths=default_paths,
            default_routes=default_routes,
            buffer_caps=buffer_caps,
            model=model,
            settings=settings,
            command=shlex.join(["topo-gate", *sys.argv[1:]]),
        )
        result = _probe_or_fail(options, console, show_progress=not as_json)
    outlook = outlooks(result.profile, model=model, hidden=None if model else hidden)
    if as_json:
        click.echo(json.dumps({**_as_json(result), "launchers": asdict(outlook)}, allow_nan=False, indent=1))
    else:
        console.print(
            summary(
                result.profile,
                profile_path=str(result.profile_path),
                evidence_path=str(result.evidence_path),
                notes=result.notes,
                preflight=result.preflight,
                outlook=outlook,
            )
        )


def _refuse_ignored_capture(capture: Path | None, device: str, replay_path: Path | None) -> None:
    # An option that would be silently ignored is a usage error: the user meant something by it.
    if capture is None:
        return
    if replay_path is not None:
        raise fail(
            ExitCode.USAGE, "--from has no effect with --replay (the evidence carries its own capture)"
        )
    if device == "cpu":
        raise fail(
            ExitCode.USAGE, "--from has no effect with --device cpu (the gloo harness reads no GPU node)"
        )


def _hidden(hidden: int | None, model: str | None) -> int:
    if (hidden is None) == (model is None):
        raise fail(ExitCode.USAGE, "give exactly one of --hidden N or --model NAME (or --replay EVIDENCE)")
    if hidden is not None:
        return hidden
    assert model is not None  # exactly one of the two was given
    try:
        return lookup_model(model).hidden
    except UnknownModel as error:
        raise fail(ExitCode.USAGE, str(error)) from None


def _probe_or_fail(options: ProbeOptions, console: Console, *, show_progress: bool) -> ProbeResult:
    try:
        if not show_progress:
            return probe(options)
        with ProbeProgressDisplay(console) as display:
            return probe(
                options,
                on_progress=display,
                on_note=lambda note: console.print(_note_text(note)),
                on_preflight=lambda rows: console.print(preflight_view([row.to_dict() for row in rows])),
            )
    except NvmlUnavailable:
        raise fail(ExitCode.NO_DRIVER, f"no NVIDIA GPU/driver found on this machine; {REPLAY_HINT}") from None
    except NvmlCrash as error:
        raise fail(
            ExitCode.NVML_CRASH, f"{error} (`topo-gate capture FILE` records what it answered)"
        ) from None
    except CaptureError as error:
        raise fail(ExitCode.UNREADABLE, str(error)) from None
    except BudgetTooSmall as error:
        raise fail(ExitCode.USAGE, f"--budget: {error}") from None
    except NothingToProbe as error:
        raise fail(ExitCode.USAGE, str(error)) from None
    except (TrialsFailed, PlanFailed, GpuBusy) as error:
        raise fail(ExitCode.TRIALS_FAILED, str(error)) from None
    except ProfileError as error:  # the loader's semantic checks refuse what the trials imply
        raise fail(
            ExitCode.NOT_OK,
            f"the measurements imply a profile topo-gate would refuse ({error}); the evidence is kept "
            "beside --out: re-derive with `topo-gate decide EVIDENCE` and please report it",
        ) from None


def _note_text(note: str) -> Text:
    # Notes quote the node and the plan (GPU names, classes): text from outside, shown literally.
    return Text("note: ", style="yellow").append_text(file_text(note))


def _replay_or_fail(evidence: Path, out: Path, settings: DecideSettings) -> ProbeResult:
    try:
        return replay(evidence, out=out, settings=settings)
    except (EvidenceError, CaptureError) as error:
        raise fail(ExitCode.UNREADABLE, str(error)) from None
    except ProfileError as error:  # evidence that parses but implies no valid profile
        raise fail(ExitCode.UNREADABLE, f"{evidence}: the profile it implies is invalid: {error}") from None


def _as_json(result: ProbeResult) -> dict[str, object]:
    return {
        "profile_path": str(result.profile_path),
        "evidence_path": str(result.evidence_path),
        "notes": result.notes,
        "preflight": [dict(row) for row in result.preflight],
        "profile": result.profile.to_dict(),
    }
