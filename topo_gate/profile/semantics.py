"""What a well-formed profile may claim: the checks a valid seal over impossible content must fail.

The shape checks (``__post_init__`` of the schema classes) see one field at a time; a resealed hand
edit, or evidence that describes an impossible run, passes them and the digest. ``check_semantics``
refuses, naming the field, every claim no measurement can make:

- a rung: a fast path slower than the baseline (isolated or in context), a CI that does not contain
  its speed-up, an NCCL rung with a speed-up, a CPU backend in a GPU profile (or the reverse);
- the node: a decision for GPUs the node does not have, or for a group the node lists under another
  class (the reader looks decisions up by the class the node gives a group), a TP size both skipped
  and decided, a profile that decides nothing;
- the price table (v1.3): a table without its decision or with another group, hidden or dtype, a
  size that is no ``tokens x hidden`` message, no baseline, a CI reaching further from its median
  than a probe's rounds can (``GPU_CI_FACTOR``), and a rule the table contradicts (a rung
  named where the table has no price for it, a speed-up above what the table's medians give, an
  in-context speed-up the table's layer graphs do not give, a rung ending at a size not measured).

``decide`` (through ``probe.build_profile``: exit 3 naming the field), the loader (``validate``: exit
1) and the launcher reader (NCCL with the reason) all run this one function.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topo_gate._units import stored_speedup_text
from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.fields import COMPOSITE_SUFFIX, NCCL
from topo_gate.profile.measurements import Measurement
from topo_gate.profile.rules import DecisionEntry, Rule
from topo_gate.profile.schema import Profile
from topo_gate.profile.validate import located

#: The CPU test harness's backends: only a CPU-harness profile (``hardware.device: cpu``) may name them,
#: and it may name no GPU backend but the final NCCL rung.
CPU_BACKENDS = ("gloo", "gloo_ring")
CPU_BASELINE = "gloo"
#: How far a rung's stated figure may sit from the table's: the rung keeps 3 decimals, the table 6
#: significant digits.
_ABSOLUTE_SLACK = 1e-3
_RELATIVE_SLACK = 1e-4
#: How far a median's 95% CI may reach from it (``high <= median x factor``, and for an isolated
#: median ``low >= median / factor``; an in-context price, a difference noise may leave near 0, is
#: scaled by the larger of it and the isolated median). A probe's CI is the order statistics
#: ``(x_(4), x_(12))`` of at least 15 rounds, so a wider one says a quarter of the rounds ran that
#: much slower or faster than the middle one: not the noise of one measurement. GPU runs: the widest
#: recorded is 1.09x (``profiles/h200-x2``); the CPU harness on a loaded 2-core VM: 10.9x
#: (``tests/probe/data/cpu-gloo-tp2-tp4.evidence.json``, gloo at 2 tokens).
GPU_CI_FACTOR = 10.0
CPU_CI_FACTOR = 100.0
#: ``decide.in_context_speedups``'s floor on a backend's in-context cost (us), so a ratio stays finite.
_IN_CONTEXT_FLOOR_US = 0.01


def check_semantics(profile: Profile) -> None:
    """Refuse a well-formed profile that states something impossible; ``ProfileInvalid`` names where."""
    if not profile.decisions and not profile.skipped:
        raise ProfileInvalid("no decisions and no skipped TP sizes: the profile decides nothing", "decisions")
    cpu = profile.node.hardware.get("device") == "cpu"
    for index, entry in enumerate(profile.decisions):
        with located(f"decisions[{index}]"):
            _check_node_has_group(entry, profile.node.hardware, cpu=cpu)
            for rule_index, rule in enumerate(entry.rules):
                with located(f"rules[{rule_index}]"):
                    _check_rule(rule, cpu=cpu)
    _check_skipped(profile)
    for index, table in enumerate(profile.measurements):
        with located(f"measurements[{index}]"):
            _check_table(table, profile, cpu=cpu)
    for index, entry in enumerate(profile.decisions):
        prices = profile.measurement(entry.tp, entry.group_class, entry.pattern)
        if prices is not None:
            with located(f"decisions[{index}]"):
                _check_rules_against(entry, prices, CPU_BASELINE if cpu else NCCL)


# -- rungs --------------------------------------------------------------------------------------------


def _check_rule(rule: Rule, *, cpu: bool) -> None:
    _check_backend_kind(rule.backend, "backend", cpu=cpu)
    if rule.backend == NCCL:
        for name in ("speedup", "ci"):
            if getattr(rule, name) is not None:
                raise ProfileInvalid("an nccl rule is the baseline: it has no speedup or ci", name)
        return
    assert rule.speedup is not None and rule.ci is not None, "Rule: a non-nccl rung states both"
    _check_speedup(rule.speedup, rule.ci, "", baseline=cpu and rule.backend == CPU_BASELINE)
    if rule.in_context is not None and rule.in_context < 1.0:
        raise ProfileInvalid(
            f"{rule.in_context} is slower than the baseline in context: a rule names only a backend "
            "measured faster there too",
            "in_context",
        )
    for index, alternative in enumerate(rule.alternatives):
        where = f"alternatives[{index}]"
        _check_backend_kind(alternative.backend, f"{where}.backend", cpu=cpu)
        _check_speedup(alternative.speedup, alternative.ci, where, baseline=False)


def _check_backend_kind(backend: str, field: str, *, cpu: bool) -> None:
    if backend == NCCL:
        return
    if not cpu and backend in CPU_BACKENDS:
        raise ProfileInvalid(f"{backend} is a CPU test-harness backend; this is a GPU profile", field)
    if cpu and backend not in CPU_BACKENDS:
        raise ProfileInvalid(f"{backend} is a GPU backend; this is a CPU-harness profile", field)


def _check_speedup(speedup: float, ci: tuple[float, float], where: str, *, baseline: bool) -> None:
    def at(name: str) -> str:
        return f"{where}.{name}" if where else name

    if baseline:
        if speedup != 1.0 or tuple(ci) != (1.0, 1.0):
            raise ProfileInvalid("the baseline against itself is exactly 1.0 (ci [1.0, 1.0])", at("speedup"))
        return
    if speedup < 1.0:
        raise ProfileInvalid(
            f"{speedup} is slower than the baseline: a rule names only a backend measured faster",
            at("speedup"),
        )
    low, high = ci
    if not low <= speedup <= high:
        raise ProfileInvalid(f"[{low}, {high}] does not contain the speedup {speedup}", at("ci"))


# -- the node -----------------------------------------------------------------------------------------


def _check_node_has_group(entry: DecisionEntry, hardware: Any, *, cpu: bool) -> None:
    """The decision's GPUs exist on the node, and the node lists its group under its class."""
    gpus = hardware.get("gpus")
    indices = {gpu.get("index") for gpu in gpus if isinstance(gpu, dict)} if isinstance(gpus, list) else set()
    # Only a node that numbers its GPUs can lack one (an entry without an index says nothing).
    if not cpu and isinstance(gpus, list) and all(isinstance(index, int) for index in indices):
        missing = sorted(set(entry.group) - indices)
        if missing:
            raise ProfileInvalid(
                f"TP {entry.tp} on GPUs {list(entry.group)}, but the node has no GPU {missing[0]} "
                f"({len(indices)} GPUs listed)",
                "group",
            )
    groups = hardware.get("tp_groups")
    if not groups:
        return  # a node without tp_groups: the reader takes each decision's class as stated
    listed = groups.get(str(entry.tp))
    if not listed:
        raise ProfileInvalid(f"the node has no TP {entry.tp} group (node.hardware.tp_groups)", "tp")
    for group in listed:
        if set(group["gpus"]) == set(entry.group):
            if group["class"] != entry.group_class:
                raise ProfileInvalid(
                    f"the node lists GPUs {list(entry.group)} as {group['class']!r}, not {entry.group_class!r}",
                    "group_class",
                )
            return
    raise ProfileInvalid(
        f"GPUs {list(entry.group)} are not a TP {entry.tp} group of the node (node.hardware.tp_groups)",
        "group",
    )


def _check_skipped(profile: Profile) -> None:
    decided = {entry.tp: index for index, entry in reversed(list(enumerate(profile.decisions)))}
    for index, skipped in enumerate(profile.skipped):
        if skipped.tp in decided:
            raise ProfileInvalid(
                f"TP {skipped.tp} is both skipped ({skipped.reason}) and decided (decisions[{decided[skipped.tp]}])",
                f"skipped[{index}].tp",
            )


# -- the price table ----------------------------------------------------------------------------------


def _check_table(table: Measurement, profile: Profile, *, cpu: bool) -> None:
    entry = profile.find(table.tp, table.pattern, table.group_class)
    if entry is None:
        raise ProfileInvalid(
            f"prices TP {table.tp} {table.pattern} {table.group_class}, which the profile does not decide", ""
        )
    if entry.failed is not None:
        raise ProfileInvalid("prices a plan that failed: nothing was measured there", "")
    if set(table.group) != set(entry.group):
        raise ProfileInvalid(
            f"GPUs {list(table.group)}, but the decision measured {list(entry.group)}", "group"
        )
    for name in ("hidden", "dtype"):
        if getattr(table, name) != getattr(profile.trials, name):
            raise ProfileInvalid(
                f"{getattr(table, name)!r}, but the trials ran {getattr(profile.trials, name)!r}", name
            )
    for index, nbytes in enumerate(table.sizes):
        if nbytes % table.hidden:
            raise ProfileInvalid(
                f"{nbytes} B is not a message of tokens x hidden {table.hidden}", f"sizes[{index}]"
            )
    baseline = CPU_BASELINE if cpu else NCCL
    if baseline not in table.backends:
        raise ProfileInvalid(f"the baseline {baseline} is not priced: nothing to compare against", "backends")
    for name, prices in table.backends.items():
        plain = name[: -len(COMPOSITE_SUFFIX)] if name.endswith(COMPOSITE_SUFFIX) else name
        if plain != baseline:
            _check_backend_kind(plain, f"backends.{name}", cpu=cpu)
        with located(f"backends.{name}"):
            _check_widths(prices, CPU_CI_FACTOR if cpu else GPU_CI_FACTOR)


def _check_widths(prices: Any, factor: float) -> None:
    """Every CI of a backend within ``factor`` of its median (``GPU_CI_FACTOR`` says why)."""
    isolated = prices.median_us
    kinds = [("ci_us", isolated, prices.ci_us, True)]
    if prices.in_context_us is not None:
        kinds.append(("in_context_ci_us", prices.in_context_us, prices.in_context_ci_us, False))
    for field, values, intervals, below in kinds:
        for index, (value, interval, alone) in enumerate(zip(values, intervals, isolated, strict=True)):
            if value is None or interval is None or alone is None:
                continue
            scale, (low, high) = max(value, alone), interval
            if high > scale * factor or (below and low * factor < scale):
                raise ProfileInvalid(
                    f"[{low}, {high}] reaches more than {factor:g}x from the median {scale}: "
                    "no probe's 95% CI is that wide",
                    f"{field}[{index}]",
                )


def _check_rules_against(entry: DecisionEntry, table: Measurement, baseline: str) -> None:
    """Each rung agrees with the table: it ends at a measured size, and every backend it names
    (its own, its alternatives) is priced at each size of its range, no faster than the medians say."""
    base = table.backends[baseline]
    for rule_index, (lower, rule) in enumerate(_ranges(entry)):
        with located(f"rules[{rule_index}]"):
            if rule.max_bytes is not None and rule.max_bytes not in table.sizes:
                raise ProfileInvalid(f"{rule.max_bytes} is not a size of the price table", "max_bytes")
            if rule.backend in (NCCL, baseline):
                continue
            columns = [
                c
                for c, n in enumerate(table.sizes)
                if n > lower and (rule.max_bytes is None or n <= rule.max_bytes)
            ]
            if not columns:
                raise ProfileInvalid(f"a {rule.backend} rule over no measured size", "max_bytes")
            claims = [("", rule.backend, rule.speedup)]
            claims += [(f"alternatives[{i}].", a.backend, a.speedup) for i, a in enumerate(rule.alternatives)]
            for where, backend, speedup in claims:
                assert speedup is not None, "Rule: a non-nccl rung states its speed-up"
                _check_claim(table, base, backend, speedup, columns, where)
            if rule.in_context is not None:
                _check_in_context_claim(table, base, rule.backend, rule.in_context, columns)


def _ranges(entry: DecisionEntry) -> Iterator[tuple[int, Rule]]:
    lower = 0
    for rule in entry.rules:
        yield lower, rule
        lower = rule.max_bytes if rule.max_bytes is not None else lower


def _check_claim(
    table: Measurement, base: Any, backend: str, speedup: float, columns: list[int], where: str
) -> None:
    prices = table.backends.get(backend)
    if prices is None:
        raise ProfileInvalid(f"{backend} is not in the price table", f"{where}backend")
    bound, at = None, 0
    for c in columns:
        base_us, own_us = base.median_us[c], prices.median_us[c]
        if base_us is None or own_us is None:
            missing, status = (
                (backend, prices.status[c]) if own_us is None else ("the baseline", base.status[c])
            )
            raise ProfileInvalid(
                f"{missing} has no price at {table.sizes[c]} B (status {status}), inside this rule's range",
                f"{where}backend",
            )
        if bound is None or base_us / own_us < bound:
            bound, at = base_us / own_us, table.sizes[c]
    assert bound is not None, "a rule's range has a size (checked by the caller)"
    if speedup > bound * (1 + _RELATIVE_SLACK) + _ABSOLUTE_SLACK:
        raise ProfileInvalid(
            f"{backend} {speedup}x, but the price table's medians give it {stored_speedup_text(bound)} at {at} B",
            f"{where}speedup",
        )


def _check_in_context_claim(
    table: Measurement, base: Any, backend: str, stated: float, columns: list[int]
) -> None:
    prices = table.backends.get(backend)
    own = prices.in_context_us if prices is not None else None
    measured = []
    if own is not None and base.in_context_us is not None:
        for c in columns:
            base_us, own_us = base.in_context_us[c], own[c]
            if base_us is not None and own_us is not None:
                measured.append(base_us / max(own_us, _IN_CONTEXT_FLOOR_US))
    if not measured:
        raise ProfileInvalid(
            f"stated, but the price table has no in-context price of {backend} in this range", "in_context"
        )
    if not any(abs(stated - ratio) <= _ABSOLUTE_SLACK + _RELATIVE_SLACK * ratio for ratio in measured):
        shown = ", ".join(stored_speedup_text(ratio) for ratio in measured)
        raise ProfileInvalid(
            f"{stated}x is none of the price table's in-context speed-ups here ({shown})", "in_context"
        )
