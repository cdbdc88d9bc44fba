"""What the trials measure: per TP group a *session* of one worker group, measuring each pattern. Pure.

A ``TrialPlan`` is one pattern measured by one group of ``tp`` GPUs: every backend at every size. A
``SessionPlan`` is what one worker group runs: the plans of every pattern for that group, one after
the other, so the workers' start-up (interpreter, torch, rendezvous) and the backends' setup
(workspaces, JIT builds) are paid once per group, not once per pattern. The runner turns a session
into a JSON *spec* for the workers (``session_to_spec``), and the worker turns the spec back into the
session (``session_from_spec``), so both sides read one format. The cost model that sizes the work
(``estimate_phases``) is in ``cost.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from topo_gate.evidence.bar import DEFAULT_MARGIN  # the layer graphs' bar is decide's
from topo_gate.profile.schema import COMPOSITE_SUFFIX, DTYPE_BYTES, FUSED_PATTERN, PATTERNS, PLAIN_PATTERN

SPEC_FORMAT = "topo-gate/trial-spec/v2"
DEVICES = ("cpu", "cuda")
FAULT_KINDS = ("hang", "hang-late", "crash", "wrong", "wrong-odd", "stale", "transition", "slow")
#: Faults outside any backend: keyed STARTUP_FAULT in a plan's ``faults``. Rank 1 exits as the plan's
#: pattern starts (for a session's first pattern: right after the rendezvous), ``infra`` on every
#: attempt, ``infra-once`` on the first attempt only.
STARTUP_FAULT = "_startup"
STARTUP_FAULT_KINDS = ("infra", "infra-once")
#: Size transitions are timed after every AFTER_STEP-th ladder size, counted down from the largest
#: (2: every other power of two, 4x apart). A planner charges a route the transition after the
#: largest size that route sends to the backend's buffer; it takes the nearest measured size above,
#: so a 4x grid overstates the preceding size by at most 4x -- and the cost, which grows with it
#: (the Lamport clear of the previous message), is never understated. Every larger size would be
#: exact but cost about twice the transition phase again (profiles/h200-x2: +4.6 s against +2.1 s
#: per TP2 session, docs/trials.md "Size transitions").
AFTER_STEP = 2
#: With launcher buffer caps given (``TrialPlan.buffer_caps``), transitions are also timed after each
#: cap -- the largest message the launcher sends through that Lamport buffer, so a route that fills
#: it is charged what the buffer really holds -- and after this mid size, which prices a workload
#: whose largest batch stays far below every cap without the next cap's cost.
MID_PRIOR_TOKENS = 512
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
    ("cuda", PLAIN_PATTERN): _CUDA_PLAIN,
    # The fused kernels, then their real alternative: each plain fast path + the same norm (composites).
    ("cuda", FUSED_PATTERN): (
        "nccl",
        "trtllm_fused_oneshot",
        "trtllm_fused_twoshot",
        "trtllm_fused_oneshot_vllm",
        "trtllm_fused_twoshot_vllm",
        "trtllm_fused_oneshot_sglang",
        "trtllm_fused_twoshot_sglang",
        *(name + COMPOSITE_SUFFIX for name in _CUDA_PLAIN[1:]),
    ),
    ("cpu", PLAIN_PATTERN): ("gloo", "gloo_ring"),
    # On the harness gloo_ring plays the fused candidate and its composite the plain alternative.
    ("cpu", FUSED_PATTERN): ("gloo", "gloo_ring", "gloo_ring" + COMPOSITE_SUFFIX),
}


@dataclass(frozen=True)
class TrialPlan:
    """One TP group measuring every backend of one pattern at every size.

    ``group`` holds NVML indices (what the profile records); the runner maps them to CUDA devices.
    ``faults`` is for the harness's own tests only (backend -> a kind in FAULT_KINDS); workers
    honour it only when ``TOPO_GATE_ALLOW_FAULT_INJECTION=1`` is in their environment.
    ``context_backends``: backends the layer graphs time at every size where they are admitted, win
    or lose (the launchers' default paths, ``launchers.routes.defaults``); ``margin``: the isolated
    bar a backend must clear at a size to be confirmed in the layer graphs there (decide's margin);
    ``after_tokens``: the sizes whose calls precede the transition replays (default
    ``default_after_tokens``: every AFTER_STEP-th size down from the largest, and each of
    ``buffer_caps``); ``buffer_caps``: ladder sizes that are a launcher's Lamport buffer cap at this
    hidden size (``launchers.routes.buffer_caps``), rungs a power-of-two ladder would miss.
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
    context_backends: tuple[str, ...] = ()
    margin: float = DEFAULT_MARGIN
    after_tokens: tuple[int, ...] | None = None
    buffer_caps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # Accept lists from callers and JSON, store tuples so a plan is immutable.
        for name in ("group", "tokens", "backends", "context_backends", "buffer_caps"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "faults", dict(self.faults))
        after = self.after_tokens
        if after is None:
            after = default_after_tokens(self.tokens, self.buffer_caps)
        object.__setattr__(self, "after_tokens", tuple(after))
        problem = _plan_problem(self)
        if problem:
            raise ValueError(f"invalid trial plan: {problem}")

    def nbytes(self, tokens: int) -> int:
        return nbytes(tokens, self.hidden, self.dtype)


def _plan_problem(plan: TrialPlan) -> str | None:
    after = plan.after_tokens or ()
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
        (plan.margin >= 0, f"margin must be >= 0, got {plan.margin}"),
        (
            list(after) == sorted(set(after)) and set(after) <= set(plan.tokens),
            f"after_tokens {list(after)} must be ascending sizes of the ladder",
        ),
        (
            list(plan.buffer_caps) == sorted(set(plan.buffer_caps))
            and set(plan.buffer_caps) <= set(plan.tokens),
            f"buffer_caps {list(plan.buffer_caps)} must be ascending sizes of the ladder",
        ),
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


#: What every plan of one session must share: one worker group, one BackendContext shape.
SHARED_FIELDS = ("tp", "group", "group_class", "dtype", "hidden", "tokens", "allow_multicast", "seed")


@dataclass(frozen=True)
class SessionPlan:
    """One worker group measuring ``plans`` (one per pattern) in order, start-up paid once.

    ``deadline``: a wall-clock instant (``time.time()``); a worker past it starts no further pattern
    (the first pattern of an attempt always runs), and reports the ones it left out (``--budget``).
    """

    plans: tuple[TrialPlan, ...]
    deadline: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "plans", tuple(self.plans))
        if not self.plans:
            raise ValueError("invalid session: no plans")
        patterns = [plan.pattern for plan in self.plans]
        if len(set(patterns)) != len(patterns):
            raise ValueError(f"invalid session: patterns repeat: {patterns}")
        first = self.plans[0]
        for name in SHARED_FIELDS:
            if any(getattr(plan, name) != getattr(first, name) for plan in self.plans):
                raise ValueError(f"invalid session: its plans differ in {name}")

    @property
    def tp(self) -> int:
        return self.plans[0].tp

    @property
    def group(self) -> tuple[int, ...]:
        return self.plans[0].group

    @property
    def group_class(self) -> str:
        return self.plans[0].group_class

    @property
    def allow_multicast(self) -> bool:
        return self.plans[0].allow_multicast

    @property
    def patterns(self) -> tuple[str, ...]:
        return tuple(plan.pattern for plan in self.plans)

    def plan(self, pattern: str) -> TrialPlan:
        return next(plan for plan in self.plans if plan.pattern == pattern)

    def label(self) -> str:
        return f"TP{self.tp} {self.group_class}"


def token_ladder(max_tokens: int) -> tuple[int, ...]:
    """Powers of two from 1 up to ``max_tokens`` (inclusive when it is one): decode to prefill sizes."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    return tuple(1 << k for k in range(max_tokens.bit_length()))


def default_after_tokens(tokens: Sequence[int], buffer_caps: Sequence[int] = ()) -> tuple[int, ...]:
    """The sizes transitions are timed after, ascending: every AFTER_STEP-th size of the ladder
    without ``buffer_caps``, counted down from the largest; with caps, each cap and
    MID_PRIOR_TOKENS (when a ladder size) too. Never the smallest size: nothing is smaller."""
    caps = set(buffer_caps)
    grid = [t for t in tokens if t not in caps or _power_of_two(t)]  # a cap the ladder has anyway stays
    after = set(grid[::-1][::AFTER_STEP])
    if caps:
        after |= caps | ({MID_PRIOR_TOKENS} & set(tokens))
    return tuple(sorted(after - {tokens[0]}))


def _power_of_two(tokens: int) -> bool:
    return tokens & (tokens - 1) == 0


def ladder_with_caps(max_tokens: int, caps: Iterable[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ladder: powers of two up to ``max_tokens`` -- every decode rung a launcher captures a graph
    for (1-256 tokens, 1-512 at TP >= 4) among them -- and each buffer cap within it; and the caps
    it kept. The worker times each transition prior's replays at every smaller rung (docs/trials.md)."""
    kept = tuple(sorted({cap for cap in caps if 1 <= cap <= max_tokens}))
    return tuple(sorted(set(token_ladder(max_tokens)) | set(kept))), kept


def nbytes(tokens: int, hidden: int, dtype: str) -> int:
    """Message size of one all-reduce: tokens x hidden x dtype bytes (what the profile's rules key on)."""
    return tokens * hidden * DTYPE_BYTES[dtype]


def default_backends(pattern: str, device: str) -> tuple[str, ...]:
    """Every backend that competes for ``pattern`` on ``device``, the baseline first."""
    try:
        return _DEFAULT_BACKENDS[(device, pattern)]
    except KeyError:
        raise ValueError(f"no backends for pattern {pattern!r} on device {device!r}") from None


def session_to_spec(session: SessionPlan, *, device: str) -> dict[str, Any]:
    """The JSON document a worker reads (``--spec``): the session's plans plus the device type."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    plans = [
        {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(plan).items()}
        for plan in session.plans
    ]
    return {"format": SPEC_FORMAT, "device": device, "deadline": session.deadline, "plans": plans}


def session_from_spec(spec: Mapping[str, Any]) -> tuple[SessionPlan, str]:
    """Inverse of ``session_to_spec``: ``(session, device)``; ValueError with one line on a bad spec."""
    if spec.get("format") != SPEC_FORMAT:
        raise ValueError(f"not a trial spec (format {spec.get('format')!r}, expected {SPEC_FORMAT!r})")
    device = spec.get("device")
    if device not in DEVICES:
        raise ValueError(f"spec device must be one of {DEVICES}, got {device!r}")
    extra = set(spec) - {"format", "device", "deadline", "plans"}
    if extra or not isinstance(spec.get("plans"), list):
        raise ValueError(f"bad trial spec: expected format, device, deadline and plans, found {sorted(spec)}")
    try:
        plans = tuple(TrialPlan(**fields) for fields in spec["plans"])
        return SessionPlan(plans, deadline=spec.get("deadline")), device
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


def make_sessions(
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
    margin: float = DEFAULT_MARGIN,
    faults: Mapping[str, Mapping[str, str]] | None = None,
    context_backends: Mapping[tuple[int, str, str], Sequence[str]] | None = None,
    buffer_caps: Mapping[int, Sequence[int]] | None = None,
) -> tuple[list[SessionPlan], list[Skipped]]:
    """One session per (TP size, GPU-group class), one plan per pattern in it; TP sizes without a
    group are ``skipped``.

    Decisions are per group *class* (DESIGN.md), so one group of each class is measured: the first
    one the topology lists, which is the launcher's default group ``[0..tp-1]`` when it has that class.
    ``faults``: per pattern, the harness tests' fault injection (``TrialPlan.faults``);
    ``context_backends``: per (tp, group class, pattern), the launchers' default paths;
    ``buffer_caps``: per TP size, the launchers' Lamport buffer caps in tokens (``ladder_with_caps``).
    """
    sessions: list[SessionPlan] = []
    skipped: list[Skipped] = []
    for tp in tps:
        tokens, caps = ladder_with_caps(max_tokens, (buffer_caps or {}).get(tp, ()))
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
            plans = [
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
                    context_backends=tuple(
                        (context_backends or {}).get((tp, group.group_class, pattern), ())
                    ),
                    margin=margin,
                    buffer_caps=caps,
                )
                for pattern in patterns
            ]
            sessions.append(SessionPlan(tuple(plans)))
    return sessions, skipped


def with_backends(plan: TrialPlan, backends: Sequence[str]) -> TrialPlan:
    """The same plan restricted to ``backends`` (the runner's relaunch after a fault)."""
    kept = {b: k for b, k in plan.faults.items() if b in backends or b == STARTUP_FAULT}
    return replace(plan, backends=tuple(backends), faults=kept)


def with_tokens(plan: TrialPlan, tokens: Sequence[int]) -> TrialPlan:
    """The same plan over a shorter ladder (``--budget``); transitions follow the sizes that remain:
    the default grid and the caps kept, or the largest only when the plan had been cut to that."""
    largest_only = plan.after_tokens == (plan.tokens[-1],)
    after = (tokens[-1],) if largest_only and len(tokens) > 1 else None
    caps = tuple(cap for cap in plan.buffer_caps if cap in set(tokens))
    return replace(plan, tokens=tuple(tokens), after_tokens=after, buffer_caps=caps)
