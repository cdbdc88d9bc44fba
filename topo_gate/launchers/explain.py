"""``recommend --explain``: per pattern and size range, what was measured, what the launcher runs with
the plan, what it runs by default, the verdict, and -- where the profile's evidence has the timings --
the estimated time the plan saves over the default per call.

Pure over its inputs (a plan, the profile reading, optionally the evidence's samples); ranges are the
pieces of ``routes.check.pieces``: a size the launcher can send for the served model, where neither
route nor ladder changes.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo_gate.launchers.common import PATTERNS, LaunchPlan, Reading
from topo_gate.launchers.planning import contexts
from topo_gate.launchers.routes import Knobs, RouteError, route
from topo_gate.launchers.routes.check import Piece, is_fused, pieces

#: Evidence samples per (pattern, backend, nbytes): group latency per round, microseconds.
Timings = Mapping[tuple[str, str, int], Sequence[float]]


@dataclass(frozen=True)
class Row:
    pattern: str
    low: int
    high: int | None  # inclusive; None: every larger size
    measured: str
    plan: str
    default: str
    verdict: str
    saving: str

    row_bytes: int = 1

    @property
    def tokens(self) -> tuple[int, int | None]:
        """The range in tokens of the served model (a message is tokens x hidden x dtype bytes)."""
        first = -(-self.low // self.row_bytes)
        return first, None if self.high is None else self.high // self.row_bytes

    @property
    def sizes(self) -> str:
        """The smallest and largest message of the range, and its tokens."""
        first, last = self.tokens
        if last is None:
            return f"{_short(first * self.row_bytes)}+ ({first}+ tokens)"
        span = f"{first}" if first == last else f"{first}-{last}"
        return f"{_short(first * self.row_bytes)}-{_short(last * self.row_bytes)} ({span} tokens)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "min_bytes": self.low,
            "max_bytes": self.high,
            "tokens": list(self.tokens),
            "measured": self.measured,
            "plan": self.plan,
            "default": self.default,
            "verdict": self.verdict,
            "saving": self.saving,
        }


def _short(nbytes: int) -> str:
    """A size to three significant digits: ``7.01 MiB``, ``42 KiB``."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def _measured(reading: Reading, pattern: str, nbytes: int) -> str:
    for rule in reading.rules.get(pattern, ()):
        if rule.max_bytes is None or nbytes <= rule.max_bytes:
            if rule.backend == "nccl":
                return "nccl"
            alternatives = "".join(f", {a.backend} {a.speedup:.2f}x" for a in rule.alternatives)
            return f"{rule.backend} {rule.speedup:.2f}x{alternatives}"
    return "nccl"


def _name(backend: str | None, pattern: str) -> str:
    name = backend or "nccl"
    return f"{name} + rmsnorm (unfused)" if pattern == "allreduce_rmsnorm" and not is_fused(name) else name


def _verdict(pattern: str, mine: Piece, theirs: Piece) -> str:
    if not mine.safe:
        return "VIOLATION: plan runs a path not measured faster"
    if mine.routed:
        said = "plan: measured faster" + (
            "" if is_fused(mine.routed) or pattern == "allreduce" else " (as plain all-reduce)"
        )
    elif mine.faster:
        said = "plan: nccl (no knob reaches the faster path here)"
    else:
        said = "plan: nccl (as measured)"
    if theirs.routed is None:
        return said + "; default: nccl"
    return said + ("; default: also measured faster" if theirs.safe else "; default: NOT measured faster")


def _saving(
    timings: Timings, pattern: str, low: int, high: int | None, plan: str | None, default: str | None
) -> str:
    if not timings:
        return "n/a (no evidence)"
    names = [b or "nccl" for b in (plan, default)]
    if names[0] == names[1]:
        return "0 (same path)"
    if pattern == "allreduce_rmsnorm":
        names = [n if is_fused(n) or n == "nccl" else f"{n}+rmsnorm" for n in names]
    sizes = sorted({n for (p, _, n) in timings if p == pattern and n >= low and (high is None or n <= high)})
    diffs = []
    for nbytes in sizes:
        plan_t, default_t = (timings.get((pattern, name, nbytes)) for name in names)
        if plan_t and default_t:
            diffs.append((statistics.median(default_t), statistics.median(plan_t)))
    if not diffs:
        missing = [n for n in dict.fromkeys(names) if not any((pattern, n, s) in timings for s in sizes)]
        return f"n/a ({' and '.join(missing or names)} not timed at these sizes)"
    saved = statistics.mean(d - p for d, p in diffs)
    share = statistics.mean((d - p) / d for d, p in diffs)
    return f"{saved:+.1f} us/call ({share:+.0%}) over {len(diffs)} size(s)"


def explain(launcher: str, plan: LaunchPlan, reading: Reading, tp: int, timings: Timings = {}) -> list[Row]:  # noqa: B006 -- read only
    """The rows of ``--explain`` for a plan that follows the profile (empty for a fallback plan)."""
    if plan.fallback:
        return []
    ctx = contexts(reading, tp)[0]
    try:
        planned = route(launcher, Knobs(plan.args, plan.env, plan.config), ctx)
        default = route(launcher, Knobs(), ctx)
    except RouteError:
        return []
    rows = []
    for pattern in planned:
        default_pieces = {p.low: p for p in pieces(default[pattern], reading.ladders, pattern, ctx.row_bytes)}
        cut_plan = pieces(planned[pattern], reading.ladders, pattern, ctx.row_bytes)
        cuts = sorted({*(p.low for p in cut_plan), *default_pieces})
        for index, low in enumerate(cuts):
            high = cuts[index + 1] - 1 if index + 1 < len(cuts) else None
            mine = next(p for p in reversed(cut_plan) if p.low <= low)
            theirs = next(p for p in reversed(list(default_pieces.values())) if p.low <= low)
            rows.append(
                Row(
                    pattern,
                    low,
                    high,
                    _measured(reading, pattern, low),
                    _name(mine.routed, pattern),
                    _name(theirs.routed, pattern),
                    _verdict(pattern, mine, theirs),
                    _saving(timings, pattern, low, high, mine.routed, theirs.routed),
                    ctx.row_bytes,
                )
            )
    return rows


def evidence_timings(profile_path: str | None, evidence_ref: str | None, tp: int) -> Timings:
    """Samples per (pattern, backend, nbytes) at ``tp`` from the profile's evidence file; empty when
    there is none or it cannot be read (the table then says so)."""
    if not profile_path or not evidence_ref:
        return {}
    path = Path(profile_path).parent / evidence_ref
    try:
        evidence = json.loads(path.read_text(encoding="utf-8"))
        return {
            (run["pattern"], result["backend"], int(result["nbytes"])): result["samples_us"]
            for run in evidence["runs"]
            if run["tp"] == tp
            for result in run["results"]
            if result.get("status") == "ok" and result.get("samples_us")
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def render(rows: Sequence[Row]) -> str:
    """A plain-text table, one line per range."""
    if not rows:
        return "explain: nothing to explain (the plan is a fallback, or the launcher refuses its knobs here)"
    head = (
        "pattern",
        "sizes",
        "measured (speed-up vs nccl)",
        "plan runs",
        "default runs",
        "verdict",
        "est. saving vs default",
    )
    table = [head, *((r.pattern, r.sizes, r.measured, r.plan, r.default, r.verdict, r.saving) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in table
    )


def summary(rows: Sequence[Row]) -> str:
    """One line for ``exec``: how many ranges run a measured winner, stay on NCCL, or violate."""
    fast = sum(1 for r in rows if r.verdict.startswith("plan: measured faster"))
    violations = sum(1 for r in rows if r.verdict.startswith("VIOLATION"))
    unmeasured_default = sum(1 for r in rows if r.verdict.endswith("NOT measured faster"))
    return (
        f"{fast} of {len(rows)} size ranges on a measured winner, the rest on NCCL; {violations} violation(s); "
        f"the launcher's default would run {unmeasured_default} range(s) on paths not measured faster"
    )


def explain_profile(
    launcher: str,
    plan: LaunchPlan,
    profile: Any,
    *,
    tp: int,
    hidden: int | None,
    model: str | None,
    gpus: Any = None,
    strict: bool = False,
    fingerprint: str | None = None,
    patterns: Sequence[str] = PATTERNS,
    trust_unverified_node: bool = False,
) -> list[Row]:
    """``explain`` for ``plan``, reading ``profile`` the way the planner did: pass the same gpus,
    strict, fingerprint, patterns and trust_unverified_node (``read_profile``'s arguments)."""
    from topo_gate.launchers.common import read_profile, served_model

    reading = read_profile(
        profile,
        tp=tp,
        gpus=gpus,
        strict=strict,
        fingerprint=fingerprint,
        patterns=patterns,
        trust_unverified_node=trust_unverified_node,
    )
    if reading.fallback_reason is not None:
        return []
    reading, _ = served_model(reading, hidden=hidden, model=model)
    timings: Timings = {}
    if isinstance(profile, (str, Path)):
        from topo_gate.profile.io import load_profile

        try:
            ref = load_profile(profile).evidence
        except Exception:  # noqa: BLE001 -- read_profile above already judged the profile usable
            ref = None
        timings = evidence_timings(str(profile), ref.path if ref else None, tp)
    return explain(launcher, plan, reading, tp, timings)
