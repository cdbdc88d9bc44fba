"""What one trial run measures: a TP group, a pattern, message sizes and the competing backends. Pure.

A ``TrialPlan`` is one group of ``tp`` GPUs (one process per rank) measuring every backend of one
pattern at every size. The runner turns it into a JSON *spec* for the workers (``plan_to_spec``), and
the worker turns the spec back into the plan (``plan_from_spec``), so both sides read one format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

SPEC_FORMAT = "topo-gate/trial-spec/v1"
PATTERNS = ("allreduce", "allreduce_rmsnorm")
DEVICES = ("cpu", "cuda")
DTYPE_BYTES: Mapping[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}
FAULT_KINDS = ("hang", "hang-late", "crash", "wrong", "wrong-odd", "stale", "transition", "slow")
#: Faults of the whole worker, not of a backend: keyed STARTUP_FAULT in ``faults``. ``infra``: rank 1
#: exits before the rendezvous on every attempt; ``infra-once``: on the first attempt only.
STARTUP_FAULT = "_startup"
STARTUP_FAULT_KINDS = ("infra", "infra-once")

#: The baseline every other backend is compared with: what a launcher does when it opts into nothing.
BASELINE_BACKEND: Mapping[str, str] = {"cuda": "nccl", "cpu": "gloo"}

COMPOSITE_SUFFIX = "+rmsnorm"  # backends.COMPOSITE_SUFFIX (this module stays free of the backends)
#: Each backend is one launcher's call sequence (docs/ARCHITECTURE.md, "Backends"); symm_mem_oneshot
#: and symm_mem_twoshot are no launcher's sequence and are not measured by default.
_CUDA_PLAIN = (
    "nccl",
    "trtllm_oneshot",
    "trtllm_twoshot",
    "trtllm_oneshot_vllm",
    "trtllm_twoshot_vllm",
    "trtllm_oneshot_sglang",
    "trtllm_twoshot_sglang",
    "symm_mem_twoshot_vllm",
    "vllm_custom",
    "custom_v2_sglang",
    "pcie_ipc",
)

# Baseline first, then the candidates. Which backend can run where (SM, P2P, TP size, multicast) is
# each backend's own admission check at run time; this table only says which ones compete at all.
_DEFAULT_BACKENDS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("cuda", "allreduce"): _CUDA_PLAIN,
    # The fused kernels, then their real alternative: each plain fast path + the same norm (composites).
    ("cuda", "allreduce_rmsnorm"): (
        "nccl",
        "trtllm_fused_oneshot",
        "trtllm_fused_twoshot",
        "trtllm_fused_oneshot_vllm",
        "trtllm_fused_twoshot_vllm",
        "trtllm_fused_oneshot_sglang",
        "trtllm_fused_twoshot_sglang",
        *(name + COMPOSITE_SUFFIX for name in _CUDA_PLAIN[1:]),
    ),
    ("cpu", "allreduce"): ("gloo", "gloo_ring"),
    # On the harness gloo_ring plays the fused candidate and its composite the plain alternative.
    ("cpu", "allreduce_rmsnorm"): ("gloo", "gloo_ring", "gloo_ring" + COMPOSITE_SUFFIX),
}


@dataclass(frozen=True)
class TrialPlan:
    """One TP group measuring every backend of one pattern at every size.

    ``group`` holds NVML indices (what the profile records); the runner maps them to CUDA devices.
    ``faults`` is for the harness's own tests only (backend -> a kind in FAULT_KINDS); workers
    honour it only when ``TOPO_GATE_ALLOW_FAULT_INJECTION=1`` is in their environment.
    """

    tp: int
    group: tuple[int, ...]
    group_class: str
    pattern: str
    dtype: str
    hidden: int
    tokens: tuple[int, ...]
    backends: tuple[str, ...]
    graph_calls: int
    rounds: int
    warmup: int
    allow_multicast: bool = False
    seed: int = 0
    faults: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Accept lists from callers and JSON, store tuples so a plan is immutable.
        object.__setattr__(self, "group", tuple(self.group))
        object.__setattr__(self, "tokens", tuple(self.tokens))
        object.__setattr__(self, "backends", tuple(self.backends))
        object.__setattr__(self, "faults", dict(self.faults))
        problem = _plan_problem(self)
        if problem:
            raise ValueError(f"invalid trial plan: {problem}")

    def nbytes(self, tokens: int) -> int:
        return nbytes(tokens, self.hidden, self.dtype)


def _plan_problem(plan: TrialPlan) -> str | None:
    checks = [
        (plan.tp >= 1, f"tp must be >= 1, got {plan.tp}"),
        (len(plan.group) == plan.tp, f"group {list(plan.group)} does not have tp={plan.tp} GPUs"),
        (len(set(plan.group)) == len(plan.group), f"group {list(plan.group)} repeats a GPU"),
        (plan.pattern in PATTERNS, f"pattern {plan.pattern!r} is not one of {', '.join(PATTERNS)}"),
        (plan.dtype in DTYPE_BYTES, f"dtype {plan.dtype!r} is not one of {', '.join(DTYPE_BYTES)}"),
        (plan.hidden >= 1, f"hidden must be >= 1, got {plan.hidden}"),
        (bool(plan.tokens) and min(plan.tokens) >= 1, f"tokens must be >= 1, got {list(plan.tokens)}"),
        (list(plan.tokens) == sorted(set(plan.tokens)), "tokens must be strictly increasing"),
        (bool(plan.backends), "no backends"),
        (len(set(plan.backends)) == len(plan.backends), f"backends repeat: {list(plan.backends)}"),
        (plan.graph_calls >= 1, f"graph_calls must be >= 1, got {plan.graph_calls}"),
        (plan.rounds >= 1, f"rounds must be >= 1, got {plan.rounds}"),
        (plan.warmup >= 0, f"warmup must be >= 0, got {plan.warmup}"),
        (
            all(
                kind in (STARTUP_FAULT_KINDS if name == STARTUP_FAULT else FAULT_KINDS)
                for name, kind in plan.faults.items()
            ),
            f"fault kinds must be in {FAULT_KINDS} ({STARTUP_FAULT}: {STARTUP_FAULT_KINDS})",
        ),
        (not plan.faults or plan.tp >= 2, "fault injection acts on rank 1 and needs tp >= 2"),
    ]
    return next((message for ok, message in checks if not ok), None)


def token_ladder(max_tokens: int) -> tuple[int, ...]:
    """Powers of two from 1 up to ``max_tokens`` (inclusive when it is one): decode to prefill sizes."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    return tuple(1 << k for k in range(max_tokens.bit_length()))


def nbytes(tokens: int, hidden: int, dtype: str) -> int:
    """Message size of one all-reduce: tokens x hidden x dtype bytes (what the profile's rules key on)."""
    return tokens * hidden * DTYPE_BYTES[dtype]


def default_backends(pattern: str, device: str) -> tuple[str, ...]:
    """Every backend that competes for ``pattern`` on ``device``, the baseline first."""
    try:
        return _DEFAULT_BACKENDS[(device, pattern)]
    except KeyError:
        raise ValueError(f"no backends for pattern {pattern!r} on device {device!r}") from None


def plan_to_spec(plan: TrialPlan, *, device: str) -> dict[str, Any]:
    """The JSON document a worker reads (``--spec``): the plan plus the device type."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    spec = asdict(plan)
    spec.update(format=SPEC_FORMAT, device=device)
    return {key: list(value) if isinstance(value, tuple) else value for key, value in spec.items()}


def plan_from_spec(spec: Mapping[str, Any]) -> tuple[TrialPlan, str]:
    """Inverse of ``plan_to_spec``: ``(plan, device)``; ValueError with one line on a bad spec."""
    if spec.get("format") != SPEC_FORMAT:
        raise ValueError(f"not a trial spec (format {spec.get('format')!r}, expected {SPEC_FORMAT!r})")
    device = spec.get("device")
    if device not in DEVICES:
        raise ValueError(f"spec device must be one of {DEVICES}, got {device!r}")
    fields = {name: value for name, value in spec.items() if name not in ("format", "device")}
    try:
        return TrialPlan(**fields), device
    except TypeError as error:  # missing or unexpected field
        raise ValueError(f"bad trial spec: {error}") from None


class _GroupLike(Protocol):
    gpus: Sequence[int]
    group_class: str


class _NodeLike(Protocol):
    def tp_groups(self, tp: int) -> Sequence[_GroupLike]: ...

    def tp_unavailable(self, tp: int) -> str | None: ...


@dataclass(frozen=True)
class Skipped:
    """A TP size that gets no trials, and why (goes to evidence/profile ``skipped``)."""

    tp: int
    reason: str


def make_plans(
    node: _NodeLike,
    tps: Iterable[int],
    *,
    patterns: Sequence[str],
    device: str,
    dtype: str,
    hidden: int,
    max_tokens: int,
    graph_calls: int,
    rounds: int,
    warmup: int,
    allow_multicast: bool = False,
    seed: int = 0,
    faults: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[TrialPlan], list[Skipped]]:
    """One plan per (TP size, GPU-group class, pattern); TP sizes without a group are ``skipped``.

    Decisions are per group *class* (DESIGN.md), so one group of each class is measured: the first
    one the topology lists, which is the launcher's default group ``[0..tp-1]`` when it has that class.
    ``faults``: per pattern, the harness tests' fault injection (``TrialPlan.faults``).
    """
    plans: list[TrialPlan] = []
    skipped: list[Skipped] = []
    tokens = token_ladder(max_tokens)
    for tp in tps:
        if tp == 1:
            skipped.append(
                Skipped(tp, "TP 1 runs no all-reduce (one GPU holds the whole model): nothing to gate")
            )
            continue
        groups = list(node.tp_groups(tp))
        if not groups:
            skipped.append(Skipped(tp, node.tp_unavailable(tp) or f"no group of {tp} GPUs can run trials"))
            continue
        first_of_class: dict[str, _GroupLike] = {}
        for group in groups:
            first_of_class.setdefault(group.group_class, group)
        for group in first_of_class.values():
            for pattern in patterns:
                plans.append(
                    TrialPlan(
                        tp=tp,
                        group=tuple(group.gpus),
                        group_class=group.group_class,
                        pattern=pattern,
                        dtype=dtype,
                        hidden=hidden,
                        tokens=tokens,
                        backends=default_backends(pattern, device),
                        graph_calls=graph_calls,
                        rounds=rounds,
                        warmup=warmup,
                        allow_multicast=allow_multicast,
                        seed=seed,
                        faults=(faults or {}).get(pattern, {}),
                    )
                )
    return plans, skipped


@dataclass(frozen=True)
class CostModel:
    """Seconds a plan takes, for progress/ETA and ``--budget``: start-up, then per-step costs, then
    ``graph_calls`` calls of an alpha-beta latency per measured sample."""

    worker_start_s: float  # import torch, rendezvous, communicator init
    backend_setup_s: float  # per backend: workspaces, IPC handles, JIT
    check_s: float  # per (backend, size): one call, the reference, the cross-rank vote
    sample_overhead_s: float  # per sample: rank alignment, skew gather, heartbeat
    latency_s: float  # alpha: one call of the smallest size
    bytes_per_s: float  # beta: per-byte cost of one call


#: CPU: measured with this harness on gloo (2 shared cores, tp 2-4: ~3 s to start, ~60 us a call).
#: CUDA: fitted to the first probe on 2x H200 (TP2, hidden 7168, 14 sizes, 7 + 3 backends: 40 s in
#: all, two worker start-ups with torch, NCCL and FlashInfer included). The slowest backend sets the
#: per-byte term (FlashInfer's PCIe IPC kernel moved ~25 GB/s over NVLink), so the estimate errs long
#: on NVLink nodes and is about right on the PCIe nodes that backend was built for.
COST_MODELS: Mapping[str, CostModel] = {
    "cpu": CostModel(3.0, 0.01, 0.01, 0.002, 60e-6, 0.5e9),
    "cuda": CostModel(10.0, 0.5, 0.02, 0.003, 8e-6, 60e9),
}


def estimate_seconds(plan: TrialPlan, device: str) -> float:
    """Expected wall time of ``plan`` on ``device`` without faults (a watchdog kill adds a restart)."""
    cost = COST_MODELS[device]
    n_backends = len(plan.backends)

    def call_s(tokens: int) -> float:
        return cost.latency_s + plan.nbytes(tokens) / cost.bytes_per_s

    per_size_checks = sum(cost.check_s + (plan.warmup + 1) * call_s(t) for t in plan.tokens)
    per_round = sum(cost.sample_overhead_s + plan.graph_calls * call_s(t) for t in plan.tokens)
    return (
        cost.worker_start_s
        + n_backends * (cost.backend_setup_s + per_size_checks)
        + plan.rounds * n_backends * per_round
    )


def with_backends(plan: TrialPlan, backends: Sequence[str]) -> TrialPlan:
    """The same plan restricted to ``backends`` (the runner's relaunch after a fault)."""
    kept = {b: k for b, k in plan.faults.items() if b in backends or b == STARTUP_FAULT}
    return replace(plan, backends=tuple(backends), faults=kept)
