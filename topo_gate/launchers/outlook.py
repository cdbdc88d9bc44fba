"""What each launcher will do with a profile, on a node like the one it measured. Pure over a profile.

Every surface that shows a profile's result (``show``, the probe's closing summary, ``report.html``,
``summary.md``) says the same thing ``recommend`` would, because it comes from the planners
themselves: per launcher (its pinned release), served model and TP size,

- the default path per size range, in tokens of the served model, and whether it was measured;
- the plan: no knobs, or the knobs with the estimated saving per step;
- where nothing changes because a default path was not measured, the cause in the launcher's words
  and the one action that gives a plan, and, where that action is a launcher setting, what the plan
  is once it is taken (planned again with it as the user's own env or flags).

The vs-NCCL tables those surfaces also show compare backends with NCCL, not with a launcher's
default; this is the comparison with the default. ``report/outlook.py`` renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from topo_gate._units import human_bytes
from topo_gate.launchers import knobs
from topo_gate.launchers.plan.explain import Unmeasured, knob_words, rows, unlock_figure, unmeasured
from topo_gate.launchers.plan.explain_words import token_span, unlock_words
from topo_gate.launchers.plan.flow import LaunchPlan
from topo_gate.launchers.plan.request import PlanRequest
from topo_gate.launchers.plan.unmeasured import cause, release
from topo_gate.launchers.plan.workload import lookup_workload
from topo_gate.launchers.planners import PLANNERS
from topo_gate.launchers.routes import Knobs
from topo_gate.models import PRESETS, ModelPreset, lookup_model
from topo_gate.profile.schema import Profile

NO_TP_ALL_REDUCE = "no tensor-parallel all-reduce: nothing to plan"
CPU_HARNESS = (
    "a CPU-harness (gloo) profile: no GPU launcher runs on what it measured, so there is nothing to plan; "
    "probe a GPU node for a plan"
)


@dataclass(frozen=True)
class Shape:
    """The served model a plan is made for: a preset (with the presets of the same shape), or a bare
    hidden size when no preset has the profile's."""

    label: str
    hidden: int
    model: str | None = None
    layers: int | None = None

    @property
    def words(self) -> str:
        layers = f"{self.layers} layers" if self.layers is not None else "layers unknown"
        return f"{self.label}: hidden {self.hidden}, {layers}"


@dataclass(frozen=True)
class DefaultSpan:
    """One run of token counts over which the launcher's default takes one path for one pattern."""

    pattern: str
    first_tokens: int
    last_tokens: int | None  # None: every larger count
    path: str
    status: str  # "measured", "not measured", "beyond the largest measured size"
    row_bytes: int

    @property
    def words(self) -> str:
        if self.last_tokens is None:
            return f"{self.path} from {self.first_tokens} tokens ({self.status})"
        largest = human_bytes(self.last_tokens * self.row_bytes)
        sizes = largest if self.first_tokens == self.last_tokens else f"up to {largest}"
        return f"{self.path} at {token_span(self.first_tokens, self.last_tokens)} tokens ({sizes}, {self.status})"


@dataclass(frozen=True)
class Cause:
    """A default path with no price at the workload's sizes: what runs, why, and the one action."""

    runs: str
    tokens: tuple[int, int]
    why: str
    action: str

    @property
    def words(self) -> str:
        return f"{self.runs} at {token_span(*self.tokens)} tokens of the workload: {self.why}"


@dataclass(frozen=True)
class Outcome:
    """One planner run: the knobs (empty: none), its one-line price, or the fallback's reason."""

    knobs: str
    estimate: str
    fallback: str | None = None

    @property
    def words(self) -> str:
        if self.fallback is not None:
            return f"fallback, nothing changed: {self.fallback}"
        if not self.knobs:
            return self.estimate
        return f"{self.knobs}: {self.estimate}"


@dataclass(frozen=True)
class Outlook:
    """What one launcher will do at one TP size for one served model, and what would change it."""

    launcher: str
    tp: int
    shape: Shape
    workload: str
    outcome: Outcome
    defaults: tuple[DefaultSpan, ...] = ()
    causes: tuple[Cause, ...] = ()
    setting: str = ""  # the causes' actions that are launcher settings, as the user would set them
    with_setting: Outcome | None = None
    unlock: str = ""  # what a missing measurement could unlock (``recommend --explain``'s words)

    @property
    def release(self) -> str:
        return release(self.launcher)


@dataclass(frozen=True)
class Outlooks:
    """Every launcher's outlook for a profile, and what is left out with why (TP 1, a CPU harness)."""

    entries: tuple[Outlook, ...]
    notes: tuple[str, ...] = ()


def outlooks(
    profile: Profile,
    *,
    model: str | None = None,
    hidden: int | None = None,
    launchers: Sequence[str] = knobs.LAUNCHERS,
    workload: str | None = None,
) -> Outlooks:
    """Plan every launcher at every TP size the profile measured, for the served model (``model`` or
    ``hidden``; default: each preset shape with the profile's trial hidden size), on a node like the
    one profiled (its own fingerprint). Raises ``UnknownModel`` for an unknown ``model``."""
    if profile.cpu_harness:
        return Outlooks((), (CPU_HARNESS,))
    notes = tuple(
        f"TP 1: {NO_TP_ALL_REDUCE}"
        if skipped.tp == 1
        else f"TP {skipped.tp}: not measured ({skipped.reason}): the launchers run their own defaults"
        for skipped in profile.skipped
    ) + tuple(f"TP 1: {NO_TP_ALL_REDUCE}" for tp in profile.trials.tp if tp == 1)
    entries: list[Outlook] = []
    for tp in profile.trials.tp:
        if tp == 1:
            continue
        found: list[tuple[Shape, list[Outlook]]] = []
        for shape in shapes(profile, model=model, hidden=hidden):
            planned = [_outlook(profile, launcher, tp, shape, workload) for launcher in launchers]
            _add_shape(found, shape, planned)
        entries += [entry for _, planned in found for entry in planned]
    return Outlooks(tuple(entries), notes)


def _add_shape(found: list[tuple[Shape, list[Outlook]]], shape: Shape, planned: list[Outlook]) -> None:
    """Add one served model's outlooks, or name it beside an earlier model whose every launcher
    does the same (DeepSeek-V3.2 beside V3 where no launcher routes them apart)."""
    for i, (earlier, theirs) in enumerate(found):
        if [replace(entry, shape=shape) for entry in theirs] == planned:
            label = (
                f"{earlier.label.removesuffix(')')}, {shape.model})"
                if "(also" in earlier.label
                else (f"{earlier.label} (also {shape.model})")
            )
            merged = replace(earlier, label=label)
            found[i] = (merged, [replace(entry, shape=merged) for entry in theirs])
            return
    found.append((shape, planned))


def shapes(profile: Profile, *, model: str | None = None, hidden: int | None = None) -> list[Shape]:
    """The served models to plan for: the one named, else each preset shape (hidden size, layers,
    architecture) whose hidden size is the profile's, else the profile's hidden size alone."""
    if model is not None:
        preset = lookup_model(model)
        return [Shape(preset.name, preset.hidden, preset.name, preset.layers)]
    if hidden is not None:
        return [Shape(f"hidden {hidden}", hidden)]
    same: dict[tuple[int, int | None, str | None], list[ModelPreset]] = {}
    for preset in PRESETS.values():
        if preset.hidden == profile.trials.hidden:
            same.setdefault((preset.hidden, preset.layers, preset.architecture), []).append(preset)
    if not same:
        return [
            Shape(f"hidden {profile.trials.hidden} (no model preset of that size)", profile.trials.hidden)
        ]
    found = []
    for group in same.values():
        first, *others = group
        also = f" (also {', '.join(p.name for p in others)})" if others else ""
        found.append(Shape(first.name + also, first.hidden, first.name, first.layers))
    return found


def _outlook(profile: Profile, launcher: str, tp: int, shape: Shape, workload: str | None) -> Outlook:
    plan = _plan(profile, launcher, tp, shape, workload, env={}, args=())
    chosen = lookup_workload(workload, tp)
    base = Outlook(launcher, tp, shape, chosen.name, _outcome(plan))
    if plan.choice is None or plan.workload is None:
        return base
    untimed = unmeasured(plan.choice, launcher, plan.workload)
    causes = _causes(untimed)
    args, env = _settings(untimed, launcher)
    with_setting = None
    if args or env:
        with_setting = _outcome(_plan(profile, launcher, tp, shape, workload, env=env, args=args))
    unlock = unlock_figure(plan.choice.unlock, plan.choice.worst.pricing.row_bytes)
    return Outlook(
        launcher,
        tp,
        shape,
        chosen.name,
        base.outcome,
        defaults=tuple(default_spans(plan)),
        causes=causes,
        setting=knob_words(Knobs(args, env)),
        with_setting=with_setting,
        unlock="" if unlock is None else unlock_words(unlock),
    )


def _causes(entries: Sequence[Unmeasured]) -> tuple[Cause, ...]:
    """One cause per reason and action: two paths of one launcher (plain and fused) that are untimed
    for the same reason are one line."""
    merged: dict[tuple[str, str], Cause] = {}
    for entry in entries:
        first, last = entry.tokens
        key = (entry.why, entry.action)
        found = merged.get(key)
        if found is None:
            merged[key] = Cause(entry.runs, (first, last), entry.why, entry.action)
            continue
        paths = found.runs.replace(" here by default", f" and {entry.paths[0]} here by default", 1)
        tokens = (min(found.tokens[0], first), max(found.tokens[1], last))
        merged[key] = Cause(paths, tokens, found.why, found.action)
    return tuple(merged.values())


def _plan(
    profile: Profile,
    launcher: str,
    tp: int,
    shape: Shape,
    workload: str | None,
    *,
    env: dict[str, str],
    args: tuple[str, ...],
) -> LaunchPlan:
    request = PlanRequest(
        profile,
        tp=tp,
        fingerprint=profile.node.fingerprint,
        hidden=shape.hidden,
        model=shape.model,
        layers=shape.layers,
        user_env=env,
        user_args=args,
        workload=workload,
    )
    return PLANNERS[launcher](request)


def _outcome(plan: LaunchPlan) -> Outcome:
    if plan.fallback:
        return Outcome("", "", plan.reason)
    words = knob_words(Knobs(plan.args, plan.env, plan.config))
    return Outcome(words + (" in the LLM-API options" if plan.config else ""), plan.estimate)


def _settings(untimed: Sequence[Unmeasured], launcher: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The launcher settings that make the unmeasured default paths ``untimed`` timed (``UNTIMED``)."""
    args: list[str] = []
    env: dict[str, str] = {}
    for entry in untimed:
        found = cause(entry.paths[0], launcher)
        if found is None:
            continue
        if found.args and not _contains(args, found.args):
            args += found.args
        env.update(found.env)
    return tuple(args), env


def _contains(tokens: Sequence[str], part: Sequence[str]) -> bool:
    return any(list(tokens[i : i + len(part)]) == list(part) for i in range(len(tokens)))


def default_spans(plan: LaunchPlan) -> list[DefaultSpan]:
    """The default's path per run of token counts, per pattern: ``recommend --explain``'s range
    rows with the same path and status folded together."""
    assert plan.choice is not None
    row_bytes = plan.choice.worst.pricing.row_bytes
    spans: list[DefaultSpan] = []
    for row in rows(plan.choice):
        status = (
            "beyond the largest measured size"
            if row.note.startswith("beyond the largest measured size")
            else "measured"
            if row.default_us is not None
            else "not measured"
        )
        last = spans[-1] if spans else None
        if last is not None and (last.pattern, last.path, last.status) == (row.pattern, row.default, status):
            spans[-1] = DefaultSpan(
                row.pattern, last.first_tokens, row.last_tokens, row.default, status, row_bytes
            )
        else:
            spans.append(
                DefaultSpan(row.pattern, row.first_tokens, row.last_tokens, row.default, status, row_bytes)
            )
    return spans
