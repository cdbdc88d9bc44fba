"""The decisions: per (TP size, GPU-group class, pattern), a ladder of byte-range rules.

``DecisionEntry`` holds the ladder, ``Rule`` one rung, ``Alternative`` another backend that cleared
the same bar over a rung's whole range. Each checks its shape in ``__post_init__``; what the rungs
may claim given the rest of the profile (the node, the measurements) is ``semantics.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.fields import (
    BACKENDS,
    NCCL,
    PATTERNS,
    checked_ci,
    each,
    gpu_group,
    or_empty,
    round6,
    typed_items,
)
from topo_gate.profile.validate import (
    expect_choice,
    expect_int,
    expect_mapping,
    expect_optional_str,
    expect_positive_float,
    expect_str,
    require,
)


@dataclass(frozen=True)
class Alternative:
    """Another backend that also beat NCCL by the same bar at *every* measured size of a rule's range
    (schema v1.1), though not by the most. ``speedup`` / ``ci`` are its weakest over the range, as a
    rule's own are. A launcher whose path runs this backend there may still switch it on."""

    backend: str
    speedup: float
    ci: tuple[float, float]

    def __post_init__(self) -> None:
        expect_choice(self.backend, "backend", BACKENDS, "backend")
        if self.backend == NCCL:
            raise ProfileInvalid("nccl is the baseline, never an alternative to it", "backend")
        object.__setattr__(self, "speedup", round6(expect_positive_float(self.speedup, "speedup")))
        object.__setattr__(self, "ci", checked_ci(self.ci, "ci"))

    @classmethod
    def from_dict(cls, data: object) -> Alternative:
        data = expect_mapping(data, "")
        return cls(backend=require(data, "backend"), speedup=require(data, "speedup"), ci=require(data, "ci"))

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "speedup": self.speedup, "ci": list(self.ci)}


@dataclass(frozen=True)
class Rule:
    """One rung of a ladder: message sizes in ``(previous max_bytes, max_bytes]`` use ``backend``.

    ``max_bytes=None`` means "and everything larger"; it is always the last rung, and always NCCL.
    A non-NCCL rung must carry the ``speedup`` over NCCL it was measured with and its confidence
    interval ``ci = (low, high)``: a backend is preferred only on evidence, never by default.

    ``alternatives`` (schema v1.1): the other backends that cleared the same bar against NCCL at every
    measured size of the range, fastest first. Empty on an NCCL rule (nothing else cleared the bar
    there) and in every v1.0 profile; written only when non-empty, so a profile without any keeps the
    v1.0 content and digest.

    ``in_context`` (schema v1.2): the backend's weakest speedup over NCCL across the range when the
    all-reduce runs inside a layer-like graph (GEMM -> all-reduce [-> norm]) rather than back to
    back; written only when measured.
    """

    max_bytes: int | None
    backend: str
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    reason: str | None = None
    alternatives: tuple[Alternative, ...] = ()
    in_context: float | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is not None:
            expect_int(self.max_bytes, "max_bytes", minimum=1)
        expect_choice(self.backend, "backend", BACKENDS, "backend")
        expect_optional_str(self.reason, "reason")
        if self.speedup is not None:
            object.__setattr__(self, "speedup", round6(expect_positive_float(self.speedup, "speedup")))
        if self.ci is not None:
            object.__setattr__(self, "ci", checked_ci(self.ci, "ci"))
        if self.in_context is not None:
            object.__setattr__(
                self, "in_context", round6(expect_positive_float(self.in_context, "in_context"))
            )
        if self.backend != NCCL:
            for name in ("speedup", "ci"):
                if getattr(self, name) is None:
                    raise ProfileInvalid(
                        f"a {self.backend} rule must state the {name} it was measured with", name
                    )
        object.__setattr__(self, "alternatives", self._checked_alternatives())

    def _checked_alternatives(self) -> tuple[Alternative, ...]:
        alternatives = typed_items(self.alternatives, Alternative, "alternatives")
        if alternatives and self.backend == NCCL:
            raise ProfileInvalid("an nccl rule has no alternatives (nothing beat nccl there)", "alternatives")
        seen: set[str] = set()
        for index, alternative in enumerate(alternatives):
            where = f"alternatives[{index}].backend"
            if alternative.backend == self.backend:
                raise ProfileInvalid(f"{alternative.backend} is the rule's own backend", where)
            if alternative.backend in seen:
                raise ProfileInvalid(f"{alternative.backend} is listed twice", where)
            seen.add(alternative.backend)
        return alternatives

    @property
    def faster_than_nccl(self) -> frozenset[str]:
        """Every backend measured faster than NCCL across this range: the rule's own (unless it is
        NCCL) and its alternatives. Empty on an NCCL rule."""
        own = () if self.backend == NCCL else (self.backend,)
        return frozenset((*own, *(a.backend for a in self.alternatives)))

    @classmethod
    def from_dict(cls, data: object) -> Rule:
        data = expect_mapping(data, "")
        return cls(
            max_bytes=require(data, "max_bytes"),
            backend=require(data, "backend"),
            speedup=data.get("speedup"),
            ci=data.get("ci"),
            reason=data.get("reason"),
            alternatives=each(or_empty(data.get("alternatives"), []), "alternatives", Alternative.from_dict),
            in_context=data.get("in_context"),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "max_bytes": self.max_bytes,
            "backend": self.backend,
            "speedup": self.speedup,
            "ci": None if self.ci is None else list(self.ci),
        }
        if self.alternatives:  # omitted when empty: a rule without any reads (and hashes) as in v1.0
            data["alternatives"] = [alternative.to_dict() for alternative in self.alternatives]
        if self.in_context is not None:  # likewise (v1.2)
            data["in_context"] = self.in_context
        data["reason"] = self.reason
        return data


@dataclass(frozen=True)
class DecisionEntry:
    """The measured ladder for one (TP size, GPU-group class, pattern): ordered size rules.

    ``group`` is the GPU group that was measured (NVML indices); the decision applies to every group
    of the same ``group_class``. Rules are contiguous: strictly increasing ``max_bytes``, the last
    ``None`` with NCCL, so every message size has exactly one rule and sizes beyond the largest
    measured one are NCCL.

    ``failed`` (schema v1.2): why the trials for this entry never ran (the plan failed twice and the
    probe was told ``--allow-partial``); its one NCCL rule is then no measurement.
    """

    tp: int
    group: tuple[int, ...]
    group_class: str
    pattern: str
    rules: tuple[Rule, ...]
    failed: str | None = None

    def __post_init__(self) -> None:
        expect_int(self.tp, "tp", minimum=1)
        object.__setattr__(self, "group", gpu_group(self.group, "group", size=self.tp))
        expect_str(self.group_class, "group_class")
        expect_choice(self.pattern, "pattern", PATTERNS, "pattern")
        rules = typed_items(self.rules, Rule, "rules")
        object.__setattr__(self, "rules", rules)
        self._check_ladder()
        expect_optional_str(self.failed, "failed")
        if self.failed is not None and (len(rules) != 1 or rules[0].backend != NCCL):
            raise ProfileInvalid("a failed entry has exactly one rule, nccl (nothing was measured)", "failed")

    def _check_ladder(self) -> None:
        if not self.rules:
            raise ProfileInvalid(
                "must not be empty (the last rule is {max_bytes: null, backend: nccl})", "rules"
            )
        previous = 0
        for index, rule in enumerate(self.rules[:-1]):
            where = f"rules[{index}].max_bytes"
            if rule.max_bytes is None:
                raise ProfileInvalid("only the last rule may be null (unbounded)", where)
            if rule.max_bytes <= previous:
                raise ProfileInvalid(f"must be > {previous} (rules must be ordered)", where)
            previous = rule.max_bytes
        last, where = self.rules[-1], f"rules[{len(self.rules) - 1}]"
        if last.max_bytes is not None:
            raise ProfileInvalid(
                f"the last rule must be null (sizes above the largest measured), found {last.max_bytes}",
                f"{where}.max_bytes",
            )
        if last.backend != NCCL:
            raise ProfileInvalid(
                f"the last rule covers unmeasured sizes and must be nccl, found {last.backend}",
                f"{where}.backend",
            )

    def rule_for(self, nbytes: int | None) -> tuple[int, Rule]:
        """The rule covering ``nbytes`` and its exclusive lower bound; ``None`` -> the smallest sizes."""
        lower = 0
        for rule in self.rules:
            if nbytes is None or rule.max_bytes is None or nbytes <= rule.max_bytes:
                return lower, rule
            lower = rule.max_bytes
        raise AssertionError("unreachable: the last rule is unbounded (checked in __post_init__)")

    @property
    def key(self) -> tuple[int, str, str]:
        return (self.tp, self.pattern, self.group_class)

    @classmethod
    def from_dict(cls, data: object) -> DecisionEntry:
        data = expect_mapping(data, "")
        return cls(
            tp=require(data, "tp"),
            group=require(data, "group"),
            group_class=require(data, "group_class"),
            pattern=require(data, "pattern"),
            rules=each(require(data, "rules"), "rules", Rule.from_dict),
            failed=data.get("failed"),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tp": self.tp,
            "group": list(self.group),
            "group_class": self.group_class,
            "pattern": self.pattern,
        }
        if self.failed is not None:  # written only when set (v1.2)
            data["failed"] = self.failed
        data["rules"] = [rule.to_dict() for rule in self.rules]
        return data
