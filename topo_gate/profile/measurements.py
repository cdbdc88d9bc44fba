"""Schema v1.3's price table: per (TP size, group class, pattern), what every backend costs per size.

A planner prices a launcher's route with it: the median microseconds per call of each backend at each
ladder size, isolated and, where layer graphs were timed, in context; and for Lamport-style backends
the cost of a size transition. ``decide`` writes it from the evidence (``decide/prices.py``); the
YAML shape is in docs/profile.md. Principle 3, unknown is not false: every missing number has a
status that says why (``STATUSES``), and a number never stands where the status says there is none.

Each class checks what it can see in ``__post_init__``: ``BackendPrices`` one backend's lists
against each other, ``Measurement`` every list against ``sizes``. What the table may say given the
profile's rules is ``semantics.py``'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from topo_gate._units import us_text
from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.fields import (
    BACKENDS,
    COMPOSITE_SUFFIX,
    DTYPES,
    FUSED_PATTERN,
    PATTERNS,
    gpu_group,
    of_type,
    sub,
)
from topo_gate.profile.validate import (
    describe,
    expect_choice,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
    located,
    require,
)

#: Per size: ``ok`` measured; ``stopped`` measured, then stopped early as a clear loser (fewer rounds,
#: still a measurement); ``wrong`` a wrong answer (no price: it must not run there); ``unavailable``
#: the backend cannot run at this size or on this group; ``failed`` / ``timeout`` it crashed or hung;
#: ``absent`` the run recorded nothing for it at this size.
STATUSES: tuple[str, ...] = ("ok", "stopped", "wrong", "unavailable", "failed", "timeout", "absent")
#: The statuses that carry a median (and may carry an in-context price and transition costs).
PRICED: tuple[str, ...] = ("ok", "stopped")

CI = tuple[float, float]

#: Physical bounds on a per-call price (docs/profile.md, "Bounds on the numbers"): a profile holding a number outside
#: them was not measured by a probe, whatever its seal says. ``MIN_CALL_US``: no GPU all-reduce
#: completes in less; the fastest kernel that exists, TensorRT-LLM's Lamport one-shot between two
#: NVLink-connected H200s, is 2.6 us a call (``profiles/h200-x2``), and a kernel's launch inside a CUDA
#: graph alone is of that order. ``MAX_CALL_US``: the probe's watchdog kills a rank that spends longer
#: than the step timeout (``probe/options.py`` ``DEFAULT_STEP_TIMEOUT_S``, 60 s) on one sample (one
#: graph replay), so no sample, and no transition of one replay, can be longer.
MIN_CALL_US = 0.5
MAX_CALL_US = 60e6


def is_priced_backend(name: str) -> bool:
    """A name the table may price: a schema backend, or a composite ``<backend>+rmsnorm``."""
    plain = name[: -len(COMPOSITE_SUFFIX)] if name.endswith(COMPOSITE_SUFFIX) else name
    return plain in BACKENDS


def _ascending(values: tuple[int, ...]) -> bool:
    return all(values[i] < values[i + 1] for i in range(len(values) - 1))


def _number(value: object, field: str, *, floor: float) -> float:
    """``value`` as a per-call price in ``[floor, MAX_CALL_US]``: ``floor`` is ``MIN_CALL_US`` for a
    measured median, 0 for a difference (in context, a transition), which noise may leave at 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProfileInvalid(f"must be a finite number, found {describe(value)}", field)
    if value < 0 or (floor and value == 0):
        raise ProfileInvalid(f"must be {'> 0' if floor else '>= 0'}, found {value!r}", field)
    if value < floor:
        raise ProfileInvalid(
            f"{value!r} us is faster than any all-reduce kernel (at least {MIN_CALL_US} us a call)", field
        )
    if value > MAX_CALL_US:
        raise ProfileInvalid(
            f"{value!r} us is longer than a probe can time (at most {us_text(MAX_CALL_US, 0)} us: the step timeout)",
            field,
        )
    return float(value)


def _optional_numbers(values: object, field: str, *, length: int, floor: float) -> tuple[float | None, ...]:
    items = expect_list(values, field)
    if len(items) != length:
        raise ProfileInvalid(f"must have one entry per size ({length}), found {len(items)}", field)
    numbers: list[float | None] = []
    for i, value in enumerate(items):
        # The common case inline (a float in range): a table holds thousands of them.
        if value is None or (type(value) is float and floor <= value <= MAX_CALL_US):
            numbers.append(value)
        else:
            numbers.append(_number(value, f"{field}[{i}]", floor=floor))
    return tuple(numbers)


def _intervals(
    values: object, field: str, around: tuple[float | None, ...], *, positive: bool
) -> tuple[CI | None, ...]:
    """One ``[low, high]`` per value of ``around`` (null exactly where it is null), containing it.
    How far it may reach from its value is the profile's semantics (``semantics.CI_FACTOR``)."""
    items = expect_list(values, field)
    if len(items) != len(around):
        raise ProfileInvalid(f"must have one entry per size ({len(around)}), found {len(items)}", field)
    intervals: list[CI | None] = []
    for i, (item, centre) in enumerate(zip(items, around, strict=True)):
        # The common case inline (two floats, in range, around a value): a table holds hundreds of
        # them, and naming each one's field for an error that never comes was most of the cost.
        if centre is not None and type(item) is list and len(item) == 2:
            low, high = item
            if (
                type(low) is float
                and type(high) is float
                and (0 < low if positive else 0 <= low)
                and low <= centre <= high <= MAX_CALL_US
            ):
                intervals.append((low, high))
                continue
        where = f"{field}[{i}]"
        if centre is None or item is None:
            if centre is not item:
                raise ProfileInvalid("null exactly where the value it bounds is null", where)
            intervals.append(None)
            continue
        bounds = expect_list(item, where)
        if len(bounds) != 2:
            raise ProfileInvalid(f"must be [low, high], found {len(bounds)} numbers", where)
        low = _number(bounds[0], f"{where}[0]", floor=0.0)
        high = _number(bounds[1], f"{where}[1]", floor=0.0)
        if positive and low == 0:
            raise ProfileInvalid(f"must be > 0, found {low!r}", f"{where}[0]")
        if not low <= centre <= high:
            raise ProfileInvalid(f"[{low}, {high}] does not contain its value {centre}", where)
        intervals.append((low, high))
    return tuple(intervals)


@dataclass(frozen=True)
class Transition:
    """A Lamport-style backend's size transitions: ``cost_us[r][c]`` is the extra microseconds of ONE
    graph replay at ``sizes[c]`` right after calls of ``after_bytes[r]``, over a steady replay
    (``max(0, (median after - median steady) x graph_calls)``, decide's ``transition_us``); null
    where ``after_bytes[r] <= sizes[c]`` or it was not measured. Column counts are checked against
    the sizes by ``Measurement``."""

    after_bytes: tuple[int, ...]
    cost_us: tuple[tuple[float | None, ...], ...]

    def __post_init__(self) -> None:
        after = tuple(
            expect_int(n, f"after_bytes[{i}]", minimum=1)
            for i, n in enumerate(expect_list(self.after_bytes, "after_bytes"))
        )
        if not after:
            raise ProfileInvalid("must list at least one size (else leave the transition out)", "after_bytes")
        if not _ascending(after):
            raise ProfileInvalid(f"must be strictly ascending, found {list(after)}", "after_bytes")
        rows = expect_list(self.cost_us, "cost_us")
        if len(rows) != len(after):
            raise ProfileInvalid(
                f"must have one row per after_bytes ({len(after)}), found {len(rows)}", "cost_us"
            )
        width = len(expect_list(rows[0], "cost_us[0]"))
        cost = tuple(
            _optional_numbers(row, f"cost_us[{r}]", length=width, floor=0.0) for r, row in enumerate(rows)
        )
        object.__setattr__(self, "after_bytes", after)
        object.__setattr__(self, "cost_us", cost)

    def check_columns(self, priced: tuple[bool, ...]) -> None:
        """One column per size of the backend, and a cost only where it has a steady price."""
        for r, row in enumerate(self.cost_us):
            if len(row) != len(priced):
                raise ProfileInvalid(
                    f"must have one entry per size ({len(priced)}), found {len(row)}", f"cost_us[{r}]"
                )
            for c, cost in enumerate(row):
                if cost is not None and not priced[c]:
                    raise ProfileInvalid(
                        "no steady price at this size to add a transition to", f"cost_us[{r}][{c}]"
                    )

    def check_sizes(self, sizes: tuple[int, ...]) -> None:
        """Each ``after_bytes`` is a size of the table, and a cost stands only after a larger size."""
        for r, after in enumerate(self.after_bytes):
            if after not in sizes:
                raise ProfileInvalid(f"{after} is not a size of the table", f"after_bytes[{r}]")
            for c, cost in enumerate(self.cost_us[r]):
                if cost is not None and after <= sizes[c]:
                    raise ProfileInvalid(
                        f"a transition is after a larger size: {after} B is not larger than {sizes[c]} B",
                        f"cost_us[{r}][{c}]",
                    )

    @classmethod
    def from_dict(cls, data: object) -> Transition:
        data = expect_mapping(data, "")
        return cls(after_bytes=require(data, "after_bytes"), cost_us=require(data, "cost_us"))

    def to_dict(self) -> dict[str, Any]:
        return {"after_bytes": list(self.after_bytes), "cost_us": [list(row) for row in self.cost_us]}


@dataclass(frozen=True)
class BackendPrices:
    """One backend of a run, per size of its table: ``status``, the median microseconds per call and
    the 95% order-statistic CI of that median (null where the status has no price), and where timed
    in a layer graph, the in-context price (layer minus the GEMM alone, medians) with its CI (the
    layer samples' CI minus the GEMM median). ``in_context_us`` is None when the backend was never
    timed in context; ``transition`` None for a backend without size transitions."""

    status: tuple[str, ...]
    median_us: tuple[float | None, ...]
    ci_us: tuple[CI | None, ...]
    in_context_us: tuple[float | None, ...] | None = None
    in_context_ci_us: tuple[CI | None, ...] | None = None
    transition: Transition | None = None

    def __post_init__(self) -> None:
        status = tuple(
            expect_choice(s, f"status[{i}]", STATUSES, "status")
            for i, s in enumerate(expect_list(self.status, "status"))
        )
        if not status:
            raise ProfileInvalid("must have one entry per size, found none", "status")
        median = _optional_numbers(self.median_us, "median_us", length=len(status), floor=MIN_CALL_US)
        for i, (state, value) in enumerate(zip(status, median, strict=True)):
            if (value is not None) != (state in PRICED):
                has = "has no" if value is None else "has a"
                raise ProfileInvalid(
                    f"status {state} {has} median: a price exactly where measured", f"median_us[{i}]"
                )
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "median_us", median)
        object.__setattr__(self, "ci_us", _intervals(self.ci_us, "ci_us", median, positive=True))
        self._check_in_context(median)
        if self.transition is not None:
            of_type(self.transition, Transition, "transition")
            with located("transition"):
                self.transition.check_columns(self.priced)

    def _check_in_context(self, median: tuple[float | None, ...]) -> None:
        if self.in_context_us is None:
            if self.in_context_ci_us is not None:
                raise ProfileInvalid("a CI without in_context_us", "in_context_ci_us")
            return
        values = _optional_numbers(self.in_context_us, "in_context_us", length=len(median), floor=0.0)
        for i, (value, isolated) in enumerate(zip(values, median, strict=True)):
            if value is not None and isolated is None:
                raise ProfileInvalid(
                    "an in-context price where the isolated status has none", f"in_context_us[{i}]"
                )
        if self.in_context_ci_us is None:
            raise ProfileInvalid("missing (in_context_us is given)", "in_context_ci_us")
        object.__setattr__(self, "in_context_us", values)
        object.__setattr__(
            self,
            "in_context_ci_us",
            _intervals(self.in_context_ci_us, "in_context_ci_us", values, positive=False),
        )

    @property
    def priced(self) -> tuple[bool, ...]:
        """Per size: whether a median exists."""
        return tuple(value is not None for value in self.median_us)

    @classmethod
    def from_dict(cls, data: object) -> BackendPrices:
        data = expect_mapping(data, "")
        transition = data.get("transition")
        return cls(
            status=require(data, "status"),
            median_us=require(data, "median_us"),
            ci_us=require(data, "ci_us"),
            in_context_us=data.get("in_context_us"),
            in_context_ci_us=data.get("in_context_ci_us"),
            transition=None if transition is None else sub(data, "transition", Transition.from_dict),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": list(self.status),
            "median_us": list(self.median_us),
            "ci_us": [None if ci is None else list(ci) for ci in self.ci_us],
        }
        if self.in_context_us is not None and self.in_context_ci_us is not None:
            data["in_context_us"] = list(self.in_context_us)
            data["in_context_ci_us"] = [None if ci is None else list(ci) for ci in self.in_context_ci_us]
        if self.transition is not None:
            data["transition"] = self.transition.to_dict()
        return data


@dataclass(frozen=True)
class Measurement:
    """The price table of one run: ``sizes`` (bytes, strictly ascending: the run's ladder; ``sizes[i]
    = tokens x hidden x itemsize``) and per backend of the run its ``BackendPrices``, composites
    ``<plain>+rmsnorm`` included (``nccl``, or ``gloo`` on the CPU harness, is the baseline)."""

    tp: int
    group: tuple[int, ...]
    group_class: str
    pattern: str
    hidden: int
    dtype: str
    sizes: tuple[int, ...]
    backends: Mapping[str, BackendPrices]

    def __post_init__(self) -> None:
        expect_int(self.tp, "tp", minimum=1)
        object.__setattr__(self, "group", gpu_group(self.group, "group", size=self.tp))
        expect_str(self.group_class, "group_class")
        expect_choice(self.pattern, "pattern", PATTERNS, "pattern")
        expect_int(self.hidden, "hidden", minimum=1)
        expect_choice(self.dtype, "dtype", DTYPES, "dtype")
        sizes = tuple(
            expect_int(n, f"sizes[{i}]", minimum=1) for i, n in enumerate(expect_list(self.sizes, "sizes"))
        )
        if not sizes:
            raise ProfileInvalid("must list the run's ladder, found no size", "sizes")
        if not _ascending(sizes):
            raise ProfileInvalid(f"must be strictly ascending, found {list(sizes)}", "sizes")
        object.__setattr__(self, "sizes", sizes)
        backends = expect_mapping(self.backends, "backends")
        if not backends:
            raise ProfileInvalid("must price at least the baseline", "backends")
        for name, prices in backends.items():
            self._check_backend(name, prices, sizes)
        object.__setattr__(self, "backends", dict(backends))

    def _check_backend(self, name: object, prices: object, sizes: tuple[int, ...]) -> None:
        if not isinstance(name, str) or not is_priced_backend(name):
            shown = repr(name) if isinstance(name, str) else describe(name)
            raise ProfileInvalid(
                f"unknown backend {shown} (a backend name, or one + '{COMPOSITE_SUFFIX}')", "backends"
            )
        where = f"backends.{name}"
        if name.endswith(COMPOSITE_SUFFIX) and self.pattern != FUSED_PATTERN:
            raise ProfileInvalid("a composite (plain path + norm) exists only in allreduce_rmsnorm", where)
        prices = of_type(prices, BackendPrices, where)
        if len(prices.status) != len(sizes):
            raise ProfileInvalid(
                f"must have one entry per size ({len(sizes)}), found {len(prices.status)}", f"{where}.status"
            )
        if prices.transition is not None:
            with located(f"{where}.transition"):
                prices.transition.check_sizes(sizes)

    @property
    def key(self) -> tuple[int, str, str]:
        """Like ``DecisionEntry.key``: the decision this table prices."""
        return (self.tp, self.pattern, self.group_class)

    @classmethod
    def from_dict(cls, data: object) -> Measurement:
        data = expect_mapping(data, "")
        backends = expect_mapping(require(data, "backends"), "backends")
        built = {}
        for name, prices in backends.items():
            with located(f"backends.{name}"):
                built[name] = BackendPrices.from_dict(prices)
        return cls(
            tp=require(data, "tp"),
            group=require(data, "group"),
            group_class=require(data, "group_class"),
            pattern=require(data, "pattern"),
            hidden=require(data, "hidden"),
            dtype=require(data, "dtype"),
            sizes=require(data, "sizes"),
            backends=built,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "group": list(self.group),
            "group_class": self.group_class,
            "pattern": self.pattern,
            "hidden": self.hidden,
            "dtype": self.dtype,
            "sizes": list(self.sizes),
            "backends": {name: prices.to_dict() for name, prices in self.backends.items()},
        }
