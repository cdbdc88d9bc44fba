"""Profile schema v1 as typed, immutable dataclasses (the YAML fields map 1:1 to attributes).

Every class checks its invariants in ``__post_init__``, so an invalid profile cannot be built, from a
file (``Profile.from_dict``) or from code (``decide``). ``from_dict`` ignores keys it does not know:
a minor schema bump (``v1.N``) only adds optional fields, which this version may safely skip.
``to_dict`` returns plain data in the canonical field order, ready for YAML or JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from topo_gate.profile.digest import compute_digest
from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.hardware_check import check_hardware
from topo_gate.profile.validate import (
    describe,
    expect_choice,
    expect_digest,
    expect_int,
    expect_list,
    expect_mapping,
    expect_optional_str,
    expect_plain_data,
    expect_positive_float,
    expect_str,
    located,
    require,
    schema_minor,
)

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a launcher ~2 ms
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _T = TypeVar("_T")

#: What writers emit. v1.1 added ``Rule.alternatives``; v1.2 added ``Rule.in_context``,
#: ``DecisionEntry.failed``, ``Profile.fleet`` and one backend name per launcher call sequence. Readers accept any
#: ``v1`` / ``v1.N``.
SCHEMA = "topo-gate/profile/v1.2"
NCCL = "nccl"
#: Every backend name schema v1 knows. ``gloo`` and ``gloo_ring`` are the CPU test harness's
#: (torch.distributed's all-reduce and a hand-written ring); ``decide`` never emits them for a GPU
#: profile, but a profile recorded on the harness must still load.
BACKENDS: tuple[str, ...] = (
    NCCL,
    "trtllm_oneshot",
    "trtllm_twoshot",
    "trtllm_fused_oneshot",
    "trtllm_fused_twoshot",
    "symm_mem_oneshot",
    "symm_mem_twoshot",
    "vllm_custom",
    # v1.2: one backend per launcher call sequence (trials/backends).
    "trtllm_oneshot_vllm",
    "trtllm_twoshot_vllm",
    "trtllm_oneshot_sglang",
    "trtllm_twoshot_sglang",
    "trtllm_fused_oneshot_vllm",
    "trtllm_fused_twoshot_vllm",
    "trtllm_fused_oneshot_sglang",
    "trtllm_fused_twoshot_sglang",
    "symm_mem_twoshot_vllm",
    "custom_v2_sglang",
    "pcie_ipc",
    "gloo",
    "gloo_ring",
)
#: ``allreduce``: the bare collective. ``allreduce_rmsnorm``: all-reduce + residual add + RMSNorm.
PATTERNS: tuple[str, ...] = ("allreduce", "allreduce_rmsnorm")

_TP_KEY_RE = re.compile(r"[1-9][0-9]*")


def _round6(value: float) -> float:
    # Six significant digits: more than a timing ratio carries, and short enough to read in YAML.
    return float(f"{value:.6g}")


def plain_copy(value: Any) -> Any:
    """A deep copy of JSON-like data with tuples turned into lists (what YAML and JSON can write)."""
    if isinstance(value, Mapping):
        return {key: plain_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_copy(item) for item in value]
    return value


def _sub(data: Mapping[str, Any], key: str, build: Callable[[Any], _T]) -> _T:
    value = require(data, key)
    with located(key):
        return build(value)


def _each(values: object, field_name: str, build: Callable[[Any], _T]) -> tuple[_T, ...]:
    built = []
    for index, item in enumerate(expect_list(values, field_name)):
        with located(f"{field_name}[{index}]"):
            built.append(build(item))
    return tuple(built)


def _or_empty(value: Any, empty: Any) -> Any:
    # An optional section written as `key: null` means the same as leaving it out.
    return empty if value is None else value


def _gpu_group(value: object, field_name: str, *, size: int) -> tuple[int, ...]:
    gpus = tuple(
        expect_int(gpu, f"{field_name}[{i}]", minimum=0)
        for i, gpu in enumerate(expect_list(value, field_name))
    )
    if len(set(gpus)) != len(gpus):
        raise ProfileInvalid(f"GPU indices must be distinct, found {list(gpus)}", field_name)
    if len(gpus) != size:
        raise ProfileInvalid(f"must list {size} GPUs (one per TP rank), found {len(gpus)}", field_name)
    return gpus


def _of_type(value: object, cls: type[_T], field_name: str) -> _T:
    if not isinstance(value, cls):
        raise ProfileInvalid(f"must be a {cls.__name__}, found {describe(value)}", field_name)
    return value


def _checked_ci(value: object, field_name: str) -> tuple[float, float]:
    bounds = expect_list(value, field_name)
    if len(bounds) != 2:
        raise ProfileInvalid(f"must be [low, high], found {len(bounds)} numbers", field_name)
    low, high = (_round6(expect_positive_float(b, f"{field_name}[{i}]")) for i, b in enumerate(bounds))
    if low > high:
        raise ProfileInvalid(f"low {low} is above high {high}", field_name)
    return (low, high)


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
        object.__setattr__(self, "speedup", _round6(expect_positive_float(self.speedup, "speedup")))
        object.__setattr__(self, "ci", _checked_ci(self.ci, "ci"))

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
            object.__setattr__(self, "speedup", _round6(expect_positive_float(self.speedup, "speedup")))
        if self.ci is not None:
            object.__setattr__(self, "ci", _checked_ci(self.ci, "ci"))
        if self.in_context is not None:
            object.__setattr__(
                self, "in_context", _round6(expect_positive_float(self.in_context, "in_context"))
            )
        if self.backend != NCCL:
            for name in ("speedup", "ci"):
                if getattr(self, name) is None:
                    raise ProfileInvalid(
                        f"a {self.backend} rule must state the {name} it was measured with", name
                    )
        object.__setattr__(self, "alternatives", self._checked_alternatives())

    def _checked_alternatives(self) -> tuple[Alternative, ...]:
        alternatives = tuple(
            _of_type(a, Alternative, f"alternatives[{i}]")
            for i, a in enumerate(expect_list(self.alternatives, "alternatives"))
        )
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
            alternatives=_each(
                _or_empty(data.get("alternatives"), []), "alternatives", Alternative.from_dict
            ),
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
        object.__setattr__(self, "group", _gpu_group(self.group, "group", size=self.tp))
        expect_str(self.group_class, "group_class")
        expect_choice(self.pattern, "pattern", PATTERNS, "pattern")
        rules = tuple(
            _of_type(r, Rule, f"rules[{i}]") for i, r in enumerate(expect_list(self.rules, "rules"))
        )
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
            rules=_each(require(data, "rules"), "rules", Rule.from_dict),
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


@dataclass(frozen=True)
class Tool:
    """The program that wrote the profile."""

    name: str
    version: str

    def __post_init__(self) -> None:
        expect_str(self.name, "name")
        expect_str(self.version, "version")

    @classmethod
    def from_dict(cls, data: object) -> Tool:
        data = expect_mapping(data, "")
        return cls(name=require(data, "name"), version=require(data, "version"))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


@dataclass(frozen=True)
class Node:
    """The node class the profile was measured on.

    ``hardware`` is the topology layer's mapping, kept as plain data; the reader uses only
    ``hardware["tp_groups"]`` (``{"2": [{"gpus": [0, 1], "class": "nvswitch"}, ...]}``) to find the
    class of a launcher's GPU group. ``software`` values are version strings, or None when unknown.
    ``provenance`` (hostname, UUIDs, command) is informational and never decides anything.
    """

    fingerprint: str
    hardware: Mapping[str, Any]
    software: Mapping[str, str | None]
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        expect_digest(self.fingerprint, "fingerprint")
        for name in ("hardware", "software", "provenance"):
            expect_plain_data(expect_mapping(getattr(self, name), name), name)
            object.__setattr__(self, name, plain_copy(getattr(self, name)))
        for key, version in self.software.items():
            if version is not None and not isinstance(version, str):
                raise ProfileInvalid(
                    f"must be a version string or null, found {describe(version)} (quote version numbers)",
                    f"software.{key}",
                )
        self._check_tp_groups()
        check_hardware(self.hardware)

    def _check_tp_groups(self) -> None:
        groups_by_tp = expect_mapping(self.hardware.get("tp_groups", {}), "hardware.tp_groups")
        for tp_key, groups in groups_by_tp.items():
            where = f"hardware.tp_groups.{tp_key}"
            if _TP_KEY_RE.fullmatch(tp_key) is None:
                raise ProfileInvalid("keys must be TP sizes written as strings, like '2'", where)
            for index, group in enumerate(expect_list(groups, where)):
                with located(f"{where}[{index}]"):
                    group = expect_mapping(group, "")
                    _gpu_group(require(group, "gpus"), "gpus", size=int(tp_key))
                    expect_str(require(group, "class"), "class")

    def group_class(self, tp: int, gpus: Sequence[int]) -> str | None:
        """The class of GPU group ``gpus`` at TP size ``tp`` (order-insensitive), or None if unlisted."""
        wanted = set(gpus)
        for group in self.hardware.get("tp_groups", {}).get(str(tp), ()):
            if set(group["gpus"]) == wanted:
                group_class: str = group["class"]  # a string: checked when the node was loaded
                return group_class
        return None

    @classmethod
    def from_dict(cls, data: object) -> Node:
        data = expect_mapping(data, "")
        return cls(
            fingerprint=require(data, "fingerprint"),
            hardware=require(data, "hardware"),
            software=require(data, "software"),
            provenance=_or_empty(data.get("provenance"), {}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "hardware": plain_copy(self.hardware),
            "software": plain_copy(self.software),
            "provenance": plain_copy(self.provenance),
        }


@dataclass(frozen=True)
class Trials:
    """How the trials were run: informational for people, not consulted by the reader."""

    dtype: str
    hidden: int
    tp: tuple[int, ...]
    patterns: tuple[str, ...]
    method: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        expect_str(self.dtype, "dtype")
        expect_int(self.hidden, "hidden", minimum=1)
        tps = tuple(expect_int(tp, f"tp[{i}]", minimum=1) for i, tp in enumerate(expect_list(self.tp, "tp")))
        patterns = tuple(
            expect_choice(p, f"patterns[{i}]", PATTERNS, "pattern")
            for i, p in enumerate(expect_list(self.patterns, "patterns"))
        )
        expect_plain_data(expect_mapping(self.method, "method"), "method")
        object.__setattr__(self, "tp", tps)
        object.__setattr__(self, "patterns", patterns)
        object.__setattr__(self, "method", plain_copy(self.method))

    @classmethod
    def from_dict(cls, data: object) -> Trials:
        data = expect_mapping(data, "")
        return cls(
            dtype=require(data, "dtype"),
            hidden=require(data, "hidden"),
            tp=require(data, "tp"),
            patterns=require(data, "patterns"),
            method=_or_empty(data.get("method"), {}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "hidden": self.hidden,
            "tp": list(self.tp),
            "patterns": list(self.patterns),
            "method": plain_copy(self.method),
        }


@dataclass(frozen=True)
class Skipped:
    """A TP size the probe was asked for but did not measure, and why (so NCCL there is explained)."""

    tp: int
    reason: str

    def __post_init__(self) -> None:
        expect_int(self.tp, "tp", minimum=1)
        expect_str(self.reason, "reason")

    @classmethod
    def from_dict(cls, data: object) -> Skipped:
        data = expect_mapping(data, "")
        return cls(tp=require(data, "tp"), reason=require(data, "reason"))

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "reason": self.reason}


@dataclass(frozen=True)
class EvidenceRef:
    """Where the raw trial evidence lives (a path relative to the profile) and its digest."""

    path: str
    digest: str | None = None

    def __post_init__(self) -> None:
        expect_str(self.path, "path")
        if self.digest is not None:
            expect_digest(self.digest, "digest")

    @classmethod
    def from_dict(cls, data: object) -> EvidenceRef:
        data = expect_mapping(data, "")
        return cls(path=require(data, "path"), digest=data.get("digest"))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "digest": self.digest}


@dataclass(frozen=True)
class FleetNode:
    """One node whose evidence a merged profile rests on: its name (the evidence file's, which the
    fleet recipes name after the host), the hostname it recorded, and the evidence file."""

    name: str
    hostname: str | None
    evidence: EvidenceRef

    def __post_init__(self) -> None:
        expect_str(self.name, "name")
        expect_optional_str(self.hostname, "hostname")
        _of_type(self.evidence, EvidenceRef, "evidence")

    @classmethod
    def from_dict(cls, data: object) -> FleetNode:
        data = expect_mapping(data, "")
        return cls(
            name=require(data, "name"),
            hostname=data.get("hostname"),
            evidence=_sub(data, "evidence", EvidenceRef.from_dict),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hostname": self.hostname, "evidence": self.evidence.to_dict()}


@dataclass(frozen=True)
class Fleet:
    """v1.2: the profile was merged from several nodes of one class (``topo-gate fleet merge``), and
    each rule held on every one of them; ``method`` says how in words."""

    method: str
    nodes: tuple[FleetNode, ...]

    def __post_init__(self) -> None:
        expect_str(self.method, "method")
        nodes = tuple(
            _of_type(n, FleetNode, f"nodes[{i}]") for i, n in enumerate(expect_list(self.nodes, "nodes"))
        )
        if not nodes:
            raise ProfileInvalid("a fleet has at least one node", "nodes")
        names = [node.name for node in nodes]
        if len(set(names)) != len(names):
            raise ProfileInvalid(f"node names must be unique, found {names}", "nodes")
        object.__setattr__(self, "nodes", nodes)

    @property
    def count(self) -> int:
        return len(self.nodes)

    @classmethod
    def from_dict(cls, data: object) -> Fleet:
        data = expect_mapping(data, "")
        fleet = cls(
            method=require(data, "method"), nodes=_each(require(data, "nodes"), "nodes", FleetNode.from_dict)
        )
        if require(data, "count") != fleet.count:
            raise ProfileInvalid(f"must equal the number of nodes listed ({fleet.count})", "count")
        return fleet

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "method": self.method, "nodes": [node.to_dict() for node in self.nodes]}


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A gating profile: per (TP, group class, pattern), which backend to use at which sizes.

    ``digest`` is None only for a profile still being built; ``with_digest()`` seals it, and the
    loader refuses a file whose content does not hash to its digest.
    """

    schema: str
    created: str
    tool: Tool
    node: Node
    trials: Trials
    decisions: tuple[DecisionEntry, ...]
    skipped: tuple[Skipped, ...] = ()
    evidence: EvidenceRef | None = None
    fleet: Fleet | None = None  # v1.2; written only when set, so older profiles keep their digest
    digest: str | None = None

    def __post_init__(self) -> None:
        schema_minor(self.schema)
        expect_str(self.created, "created")
        _of_type(self.tool, Tool, "tool")
        _of_type(self.node, Node, "node")
        _of_type(self.trials, Trials, "trials")
        decisions = tuple(
            _of_type(d, DecisionEntry, f"decisions[{i}]")
            for i, d in enumerate(expect_list(self.decisions, "decisions"))
        )
        skipped = tuple(
            _of_type(s, Skipped, f"skipped[{i}]") for i, s in enumerate(expect_list(self.skipped, "skipped"))
        )
        if self.evidence is not None:
            _of_type(self.evidence, EvidenceRef, "evidence")
        if self.fleet is not None:
            _of_type(self.fleet, Fleet, "fleet")
        if self.digest is not None:
            expect_digest(self.digest, "digest")
        seen: dict[tuple[int, str, str], int] = {}
        for index, decision in enumerate(decisions):
            if decision.key in seen:
                tp, pattern, group_class = decision.key
                raise ProfileInvalid(
                    f"duplicate of decisions[{seen[decision.key]}] "
                    f"(tp {tp}, pattern {pattern}, group_class {group_class})",
                    f"decisions[{index}]",
                )
            seen[decision.key] = index
        object.__setattr__(self, "decisions", decisions)
        object.__setattr__(self, "skipped", skipped)

    def find(self, tp: int, pattern: str, group_class: str) -> DecisionEntry | None:
        for decision in self.decisions:
            if decision.key == (tp, pattern, group_class):
                return decision
        return None

    def with_digest(self) -> Profile:
        """This profile sealed with the digest of its content."""
        return replace(self, digest=compute_digest(self.to_dict()))

    @classmethod
    def from_dict(cls, data: object) -> Profile:
        """Build from plain data, checking everything except the digest (the loader checks that,
        over the file's own content). Raises ``ProfileInvalid`` / ``ProfileSchemaTooNew``."""
        if not isinstance(data, Mapping):
            raise ProfileInvalid(f"a profile must be a mapping of fields, found {describe(data)}")
        # The schema first: a v2 profile should say "too new", not list v1 fields it lacks.
        schema_minor(require(data, "schema"))
        evidence, fleet = data.get("evidence"), data.get("fleet")
        return cls(
            schema=data["schema"],
            created=require(data, "created"),
            tool=_sub(data, "tool", Tool.from_dict),
            node=_sub(data, "node", Node.from_dict),
            trials=_sub(data, "trials", Trials.from_dict),
            decisions=_each(require(data, "decisions"), "decisions", DecisionEntry.from_dict),
            skipped=_each(_or_empty(data.get("skipped"), []), "skipped", Skipped.from_dict),
            evidence=None if evidence is None else _sub(data, "evidence", EvidenceRef.from_dict),
            fleet=None if fleet is None else _sub(data, "fleet", Fleet.from_dict),
            digest=data.get("digest"),
        )

    def to_dict(self) -> dict[str, Any]:
        data = {
            "schema": self.schema,
            "created": self.created,
            "tool": self.tool.to_dict(),
            "node": self.node.to_dict(),
            "trials": self.trials.to_dict(),
            "skipped": [skipped.to_dict() for skipped in self.skipped],
            "decisions": [decision.to_dict() for decision in self.decisions],
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
        }
        if self.fleet is not None:
            data["fleet"] = self.fleet.to_dict()
        data["digest"] = self.digest
        return data
