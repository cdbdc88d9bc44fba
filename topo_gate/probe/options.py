"""What a probe is asked (``ProbeOptions``), what it tells while it runs, what it returns, and how it fails.

Errors the CLI maps to exit codes: ``NvmlUnavailable`` (4), ``NvmlCrash`` (5), ``CaptureError`` and
``EvidenceError`` (3), ``BudgetTooSmall`` and ``NothingToProbe`` (2), ``TrialsFailed``,
``PlanFailed`` and ``activity.GpuBusy`` (6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo_gate.decide import DEFAULT_BOOTSTRAP, DEFAULT_CI_LEVEL
from topo_gate.evidence.bar import DEFAULT_MARGIN
from topo_gate.profile.schema import PATTERNS, Profile

MIN_ROUNDS = 15  # DESIGN.md: medians of >= 15 interleaved rounds
DEFAULT_TPS = (2, 4, 8)
DEFAULT_MAX_TOKENS = 8192  # a full prefill chunk (SGLang's and vLLM's default chunk size)
DEFAULT_GRAPH_CALLS = 32
DEFAULT_WARMUP = 3
DEFAULT_STEP_TIMEOUT_S = 60.0
JIT_STARTUP_TIMEOUT_S = 900.0  # FlashInfer compiling its communication kernels on first use

#: ``default_paths(tp=, capability=, group_class=, hidden=, itemsize=, pattern=) -> frozenset[str]``:
#: the launchers' default paths (``launchers.routes.defaults.default_paths``, which the CLI passes in:
#: the probe sits below the launchers and does not import them).
DefaultPaths = Callable[..., frozenset[str]]
#: ``buffer_caps(tp=, capability=, hidden=, itemsize=) -> caps``, each with ``.tokens``: the
#: launchers' Lamport buffer caps (``launchers.routes.buffer_caps.buffer_caps``, passed in by the CLI),
#: which become ladder rungs and transition priors (``trials.plan.ladder_with_caps``).
BufferCaps = Callable[..., Sequence[Any]]


class BudgetTooSmall(Exception):
    """Even the smallest useful probe (15 rounds, one message size) does not fit ``--budget``."""


class NothingToProbe(Exception):
    """No requested TP size can run on this node: nothing would be measured, so nothing is written
    (a profile of NCCL rows that no trial measured would read as a decision)."""


class TrialsFailed(Exception):
    """No trial ran at all (every plan failed before measuring); the evidence is still written."""


class PlanFailed(Exception):
    """A plan failed twice for a reason outside any backend, and ``allow_partial`` was not given: no
    profile is written (the evidence is), because that plan's sizes would read as NCCL."""


@dataclass(frozen=True)
class DecideSettings:
    margin: float = DEFAULT_MARGIN
    ci_level: float = DEFAULT_CI_LEVEL
    bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = 0


@dataclass(frozen=True)
class ProbeOptions:
    out: Path
    hidden: int
    tps: tuple[int, ...] = DEFAULT_TPS
    dtype: str = "bfloat16"
    patterns: tuple[str, ...] = PATTERNS
    device: str = "cuda"  # "cpu": the gloo harness, for CI and demos
    evidence_out: Path | None = None  # default: evidence-<UTC time>-<pid>.json beside the profile
    capture: Path | None = None  # --from: plan from a recorded capture instead of NVML
    budget_s: float | None = None
    rounds: int = MIN_ROUNDS
    max_tokens: int = DEFAULT_MAX_TOKENS
    graph_calls: int = DEFAULT_GRAPH_CALLS
    warmup: int = DEFAULT_WARMUP
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    allow_multicast: bool = False
    #: Write a profile even when a plan failed; it then records that plan as failed.
    allow_partial: bool = False
    #: Measure on GPUs found busy (a compute process, or utilisation; ``activity.py``); recorded.
    allow_busy: bool = False
    #: The harness tests' fault injection, per pattern (``TrialPlan.faults``; honoured by workers only
    #: with TOPO_GATE_ALLOW_FAULT_INJECTION=1).
    faults: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: The launchers' default paths, which the layer graphs time wherever admitted (GPU only).
    default_paths: DefaultPaths | None = None
    #: The launchers' default routes, for the preflight (``probe.preflight.DefaultRoutes``).
    default_routes: Callable[..., Sequence[Mapping[str, Any]]] | None = None
    buffer_caps: BufferCaps | None = None
    #: The served model's preset (``--model``): the preflight routes its architecture alone.
    model: str | None = None
    settings: DecideSettings = field(default_factory=DecideSettings)
    command: str | None = None  # recorded in provenance


#: A phase this many times past its estimate is flagged (progress display, the probe's notes).
OVERRUN = 2.0
OVERRUN_FLOOR_S = 1.0


@dataclass(frozen=True)
class PhaseProgress:
    """One worker phase over the whole probe: seconds spent so far (wall clock, while the workers'
    heartbeats said they were in it) against the planner's estimate for it."""

    name: str
    done_s: float
    estimate_s: float

    @property
    def overrun(self) -> bool:
        """Past twice its estimate, and by a second at least (a 0.2 s check planned at 0.1 s is no
        news): worth a person's attention -- a loaded or slower machine, or a hang."""
        return self.done_s > OVERRUN * self.estimate_s and self.done_s - self.estimate_s >= OVERRUN_FLOOR_S


@dataclass(frozen=True)
class ProbeProgress:
    """What ``on_progress`` receives, often: the session in flight and how far the whole probe is.

    ``done_s`` / ``total_s`` are in *estimated* seconds (``trials.cost``), so a progress bar over
    them moves at the pace of the work, and its ETA corrects itself as real time passes.
    """

    run: int  # 1-based: the session (one worker group)
    runs: int
    label: str  # "TP2 nvswitch"
    done_s: float
    total_s: float
    detail: str  # the worker's place ("measure of trtllm_oneshot at 64 tokens (round 3)") or a fault
    phase: str = "import"  # the phase in flight
    phases: tuple[PhaseProgress, ...] = ()
    #: Wall seconds per estimated second, re-fitted from the work since the first timed round (None
    #: until there is some): what the planner's estimate is off by on this machine, now.
    pace: float | None = None

    def remaining_s(self) -> float:
        """Seconds left: the estimated work left, re-fitted by ``pace`` once rounds were measured."""
        return max(self.total_s - self.done_s, 0.0) * (1.0 if self.pace is None else self.pace)


@dataclass(frozen=True)
class ProbeResult:
    profile: Profile
    profile_path: Path
    evidence_path: Path
    notes: list[str]
    #: The preflight rows the evidence records (``probe.preflight``), empty when it has none.
    preflight: tuple[Mapping[str, Any], ...] = ()
