"""``recommend --explain``'s figures: the price of a plan against the launcher's default, per size
range and per step, as typed values (``explain_words`` renders them; ``to_json`` writes them for
``--format json``).

Pure over a priced choice (``planning.Choice``). Each *range* row is one pattern's range of token
counts of the served model over which neither the plan's route nor the default's changes kernel and
which lies between the same two measured sizes; its prices are those of the measured size at the top
of the range (``costmodel``: median per call plus its buffer's expected size transition spread over
the step's calls in that buffer, in context where every compared path was timed there). Each *step*
row is one workload token count: the whole step, default and plan (``costmodel.step_check``), which
is what the constraint compares; the size where the plan comes closest to the default's limit is
the one that binds. Ranges whose default path was not measured say so (the plan leaves them as they
are, ``unmeasured``), and a candidate refused only for want of a measurement says what it could save
(``planning.Unlock``).

The JSON keeps microseconds to ``STORED_DECIMALS`` and shares to ``SHARE_DECIMALS`` (``_units``),
the figures themselves keep every digit: the words round them by the same rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from topo_gate._units import SHARE_DECIMALS, human_bytes, stored
from topo_gate.launchers.plan.choice import Choice, Unlock, Variant
from topo_gate.launchers.plan.costmodel import (
    Piece,
    Problem,
    StepCheck,
    binding,
    pieces,
    step_check,
    step_checks,
)
from topo_gate.launchers.plan.pricing import PriceTable, bracket
from topo_gate.launchers.plan.unmeasured import cause, setting_words, unmeasured_words
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Knobs

#: The bytes of a step's largest message read to six significant digits, as a launcher's limit
#: does: a step one token under a round size must not read as the round size.
STEP_SIZE_DIGITS = 6


@dataclass(frozen=True)
class Row:
    """One pattern's range of token counts: both sides' path and price per call (None: not measured)."""

    pattern: str
    first_tokens: int
    last_tokens: int | None  # None: every larger count
    default: str
    plan: str
    default_us: float | None  # per call; None: not measured
    plan_us: float | None
    sites: int
    source: str
    note: str
    row_bytes: int = 0  # bytes per token of the served model

    @property
    def saving_us(self) -> float | None:
        if self.default_us is None or self.plan_us is None:
            return None
        return self.default_us - self.plan_us

    @property
    def saving_us_per_step(self) -> float | None:
        saving = self.saving_us
        return None if saving is None else saving * self.sites

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "tokens": [self.first_tokens, self.last_tokens],
            "bytes": [
                self.first_tokens * self.row_bytes,
                None if self.last_tokens is None else self.last_tokens * self.row_bytes,
            ],
            "default": self.default,
            "plan": self.plan,
            "default_us_per_call": _round(self.default_us),
            "plan_us_per_call": _round(self.plan_us),
            "saving_us_per_call": _round(self.saving_us),
            "saving_us_per_step": _round(self.saving_us_per_step),
            "source": self.source,
            "note": self.note,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else stored(value)


def _share(value: float | None) -> float | None:
    return None if value is None else round(value, SHARE_DECIMALS)


def rows(choice: Choice) -> list[Row]:
    """The rows for the variant the plan was scored by (its worst), consecutive unpriced rows with
    the same paths and status folded into one range."""
    variant = choice.worst
    out = []
    for pattern in sorted(variant.plan.routes):
        if not variant.pricing.step.sites.get(pattern):
            continue  # no call site of this pattern in the step (vLLM's embedding is a norm site)
        table = variant.pricing.tables[pattern]
        for piece in pieces(variant.plan, variant.default, pattern, variant.pricing.row_bytes):
            out += _piece_rows(piece, table, variant)
    return fold(out)


def fold(found: Sequence[Row]) -> list[Row]:
    """Consecutive rows of one pattern with the same paths, neither priced, and the same status, as
    one row: a range where nothing is measured reads once, not once per measured size."""
    out: list[Row] = []
    for row in found:
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_tokens is not None
            and row.first_tokens == last.last_tokens + 1
            and (last.pattern, last.default, last.plan) == (row.pattern, row.default, row.plan)
            and None is last.default_us is row.default_us
            and None is last.plan_us is row.plan_us
            and last.note == _status(row.note)
        ):
            source = last.source if last.source == row.source else "-"
            out[-1] = replace(last, last_tokens=row.last_tokens, source=source)
        elif row.default_us is None and row.plan_us is None:
            out.append(replace(row, note=_status(row.note)))
        else:
            out.append(row)
    return out


def _status(note: str) -> str:
    """An unpriced row's note without the size it names: ``default not measured (x not measured at
    16384 bytes): left as it is`` reads ``default not measured: left as it is`` (the summary and the
    lines above the table say why)."""
    if note.startswith("default not measured ("):
        return "default not measured: left as it is"
    if note.startswith("plan path not measured ("):
        return "plan path not measured"
    return note


def _piece_rows(piece: Piece, table: PriceTable, variant: Variant) -> list[Row]:
    """The piece cut at each measured size, each part priced at its largest message."""
    row_bytes = variant.pricing.row_bytes
    sites = variant.pricing.step.sites[piece.pattern]
    out = []
    first = piece.first
    while piece.last is None or first <= piece.last:
        around = bracket(table.sizes, first)
        if around is None:
            out.append(
                _row(
                    piece,
                    first,
                    piece.last,
                    None,
                    None,
                    sites,
                    "-",
                    "beyond the largest measured size: unchanged",
                    row_bytes,
                )
            )
            break
        top = max(table.sizes[around[1]] // row_bytes * row_bytes, first)
        last = top if piece.last is None else min(piece.last, top)
        check = step_check(last, variant.plan, variant.default, variant.pricing)
        theirs = _price(check, piece.pattern, 0, piece.default)
        mine = theirs if piece.pattern not in check.changed else _price(check, piece.pattern, 1, piece.plan)
        source = variant.pricing.source(piece.pattern, around[1])
        out.append(
            _row(
                piece,
                first,
                last,
                theirs if isinstance(theirs, float) else None,
                mine if isinstance(mine, float) else None,
                sites,
                source,
                _note(piece, theirs, mine),
                row_bytes,
            )
        )
        first = last + row_bytes
    return out


def _price(check: StepCheck, pattern: str, side: int, name: str) -> float | str:
    """One call of ``pattern`` on a side at the check's size, or why it has no price."""
    price = check.per_call(pattern, side)
    if price is not None:
        return price
    return check.why or f"{name} not measured at {check.nbytes} bytes"


def _note(piece: Piece, theirs: float | str, mine: float | str) -> str:
    if isinstance(theirs, str):
        return f"default not measured ({theirs}): left as it is"
    if piece.plan == piece.default:
        return "same path"
    if isinstance(mine, str):
        return f"plan path not measured ({mine})"
    return "plan measured faster" if mine < theirs else "within the default's noise"


def _row(
    piece: Piece,
    first: int,
    last: int | None,
    default_us: float | None,
    plan_us: float | None,
    sites: int,
    source: str,
    note: str,
    row_bytes: int,
) -> Row:
    return Row(
        piece.pattern,
        first // row_bytes,
        None if last is None else last // row_bytes,
        piece.default,
        piece.plan,
        default_us,
        plan_us,
        sites,
        source,
        note,
        row_bytes,
    )


@dataclass(frozen=True)
class StepFigure:
    """One step at one message size: both sides' whole step (us), the default's limit, and why the
    plan is refused there (None: it is not). A side not priced there is None."""

    tokens: float
    nbytes: int
    weight: float | None  # of the workload's steps; None: a size the workload does not name
    default_us: float | None
    plan_us: float | None
    limit_us: float | None
    changed: tuple[str, ...]
    why: str | None
    row_bytes: int

    @property
    def saving_us(self) -> float | None:
        if self.default_us is None or self.plan_us is None:
            return None
        return self.default_us - self.plan_us

    @property
    def size(self) -> str:
        return human_bytes(self.nbytes, digits=STEP_SIZE_DIGITS)

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens": stored(self.tokens),
            "bytes": self.nbytes,
            "weight": _share(self.weight),
            "default_us_per_step": _round(self.default_us),
            "plan_us_per_step": _round(self.plan_us),
            "limit_us_per_step": _round(self.limit_us),
            "saving_us_per_step": _round(self.saving_us),
            "changed": list(self.changed),
            "why": self.why,
            "size": self.size,
            "row_bytes": self.row_bytes,
        }


def step_figure(check: StepCheck, weight: float | None, row_bytes: int) -> StepFigure:
    """One step's figures: the plan's side is priced only where the check is complete and does not
    refuse it."""
    priced = check.complete and check.why is None
    return StepFigure(
        tokens=check.tokens,
        nbytes=check.nbytes,
        weight=weight,
        default_us=check.default_us if check.complete else None,
        plan_us=check.plan_us if priced else None,
        limit_us=check.limit_us if check.complete else None,
        changed=tuple(check.changed),
        why=check.why,
        row_bytes=row_bytes,
    )


def steps(choice: Choice, workload: Workload) -> tuple[StepFigure, ...]:
    """The scored variant's whole step at each workload token count."""
    variant = choice.worst
    row_bytes = variant.pricing.row_bytes
    return tuple(
        step_figure(
            step_check(tokens * row_bytes, variant.plan, variant.default, variant.pricing), weight, row_bytes
        )
        for tokens, weight in workload.steps
    )


def binding_step(choice: Choice) -> StepFigure | None:
    """The checked size where the plan comes closest to the default's limit (None: no knobs)."""
    variant = choice.worst
    checks = step_checks(variant.plan, variant.default, variant.pricing)
    if isinstance(checks, Problem):
        return None
    found = binding([c for c in checks if c.changed and c.complete])
    return None if found is None else step_figure(found, None, variant.pricing.row_bytes)


@dataclass(frozen=True)
class Unmeasured:
    """Default paths with no price at some of the workload's sizes, untimed for one cause: what runs
    (the cause's words, naming each path), over which token counts and patterns, why, the action
    that measures them and, where that action is a launcher setting, the setting. ``beyond``: the
    sizes lie beyond the largest measured one (only a larger probe prices them, whatever the path)."""

    paths: tuple[str, ...]
    tokens: tuple[int, int]
    patterns: tuple[str, ...]
    beyond: bool
    runs: str
    why: str
    action: str
    setting: str
    share: float  # of the workload's steps

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.paths[0],
            "tokens": list(self.tokens),
            "patterns": list(self.patterns),
            "beyond": self.beyond,
            "runs": self.runs,
            "why": self.why,
            "action": self.action,
            "setting": self.setting,
            "share": _share(self.share),
        }


@dataclass
class _Found:
    """An unmeasured entry while the workload's steps are walked."""

    path: str
    beyond: bool
    runs: str
    why: str
    action: str
    setting: str
    first: int
    last: int
    patterns: list[str] = field(default_factory=list)
    weights: dict[int, float] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)


def unmeasured(choice: Choice, launcher: str, workload: Workload) -> tuple[Unmeasured, ...]:
    """The default paths with no price at the workload's sizes, with the cause and the action."""
    variant = choice.worst
    row_bytes = variant.pricing.row_bytes
    found: dict[tuple[str, bool], _Found] = {}
    for tokens, weight in workload.steps:
        for pattern, count in variant.pricing.step.sites.items():
            if not count:
                continue
            table = variant.pricing.tables[pattern]
            name = variant.default.name_at(pattern, tokens * row_bytes)
            around = bracket(table.sizes, tokens * row_bytes)
            if around is not None and all(table.measured(name, rung) for rung in set(around)):
                continue
            # A path both inside and beyond the measured sizes is two entries: inside, its cause
            # binds the plan; beyond, only the size does (a larger probe, whatever the path).
            beyond = around is None
            entry = found.get((name, beyond))
            if entry is None:
                words = None if beyond else unmeasured_words(name, launcher)
                runs, why, action = words or (
                    f"the default runs {name}",
                    "beyond the largest measured size" if beyond else "the profile has no price for it",
                    "re-probe this node with sizes that cover the workload"
                    if beyond
                    else "re-probe this node",
                )
                found_cause = None if beyond else cause(name, launcher)
                setting = "" if found_cause is None else setting_words(found_cause)
                entry = found[(name, beyond)] = _Found(
                    name, beyond, runs, why, action, setting, tokens, tokens
                )
            entry.first, entry.last = min(entry.first, tokens), max(entry.last, tokens)
            entry.weights[tokens] = weight
            if pattern not in entry.patterns:
                entry.patterns.append(pattern)
    return _merged(list(found.values()))


def _merged(entries: Sequence[_Found]) -> tuple[Unmeasured, ...]:
    """One entry per cause: two paths untimed for the same reason with the same fix (plain and fused)
    are said once, ``runs`` naming both; ``share`` is the part of the workload's steps they cover."""
    merged: dict[tuple[bool, str, str], _Found] = {}
    for entry in entries:
        key = (entry.beyond, entry.why, entry.action)
        found = merged.get(key)
        if found is None:
            merged[key] = replace(entry, paths=[entry.path], patterns=list(entry.patterns))
            continue
        found.runs = found.runs.replace(" here by default", f" and {entry.path} here by default", 1)
        found.paths.append(entry.path)
        found.first, found.last = min(found.first, entry.first), max(found.last, entry.last)
        found.patterns += [p for p in entry.patterns if p not in found.patterns]
        found.weights |= entry.weights
    return tuple(
        Unmeasured(
            paths=tuple(entry.paths),
            tokens=(entry.first, entry.last),
            patterns=tuple(entry.patterns),
            beyond=entry.beyond,
            runs=entry.runs,
            why=entry.why,
            action=entry.action,
            setting=entry.setting,
            share=sum(entry.weights.values()),
        )
        for entry in merged.values()
    )


@dataclass(frozen=True)
class UnlockFigure:
    """What a missing measurement could unlock (``planning.Unlock``): the knobs, their saving per step
    over the workload at most, and the measurement that admits them: ``kernel``'s size transition
    after ``after_bytes``, at most ``at_most_us`` at ``at_tokens`` (bounded today by the one after
    ``bounded_by_bytes``; None: nothing measured after a larger size)."""

    knobs: Knobs
    saving_us: float
    saving: float | None  # of the default's step; None: the default's step costs nothing
    kernel: str
    after_bytes: int
    after_tokens: float
    at_tokens: float
    at_most_us: float
    bounded_by_bytes: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "args": list(self.knobs.args),
            "env": dict(self.knobs.env),
            "config": dict(self.knobs.config),
            "saving_us_per_step": stored(self.saving_us),
            "saving": _share(self.saving),
            "kernel": self.kernel,
            "after_bytes": self.after_bytes,
            "after_tokens": stored(self.after_tokens),
            "at_tokens": stored(self.at_tokens),
            "at_most_us": stored(self.at_most_us),
            "bounded_by_bytes": self.bounded_by_bytes,
        }


def unlock_figure(unlock: Unlock | None, row_bytes: int) -> UnlockFigure | None:
    """What a missing measurement could unlock (None: nothing could)."""
    if unlock is None:
        return None
    return UnlockFigure(
        knobs=unlock.candidate.knobs,
        saving_us=unlock.saving_us,
        saving=unlock.saving_us / unlock.default_us if unlock.default_us else None,
        kernel=unlock.kernel,
        after_bytes=unlock.largest_prior,
        after_tokens=unlock.largest_prior / row_bytes,
        at_tokens=unlock.check.tokens,
        at_most_us=unlock.threshold_us,
        bounded_by_bytes=unlock.bounded_by,
    )


@dataclass(frozen=True)
class Totals:
    """The workload totals of the scored variant: its expected all-reduce time per step, default and
    plan, over the share of its steps that could be priced, and the mean price per call per pattern."""

    workload: str
    workload_description: str
    layers: int
    layers_known: bool
    calls_per_step: int
    sites_per_step: Mapping[str, int]
    measured_share: float
    priced_tokens: tuple[int, ...]
    workload_steps: tuple[tuple[int, float], ...]
    default_us: float | None  # per step
    plan_us: float | None
    per_call: Mapping[str, tuple[float | None, float | None]]  # default, plan; only sites in the step

    @property
    def saving(self) -> float | None:
        """The plan's saving as a share of the default's step (None: either side not priced)."""
        if not self.default_us or self.plan_us is None:
            return None
        return 1 - self.plan_us / self.default_us

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "workload_description": self.workload_description,
            "layers": self.layers,
            "layers_known": self.layers_known,
            "calls_per_step": self.calls_per_step,
            "sites_per_step": dict(self.sites_per_step),
            "measured_share": _share(self.measured_share),
            "priced_tokens": list(self.priced_tokens),
            "workload_steps": [[tokens, _share(weight)] for tokens, weight in self.workload_steps],
            "default_us_per_step": _round(self.default_us),
            "plan_us_per_step": _round(self.plan_us),
            "saving": _share(self.saving),
            "per_call": {
                pattern: {"default_us": _round(default), "plan_us": _round(plan)}
                for pattern, (default, plan) in self.per_call.items()
            },
        }


def workload_totals(choice: Choice, workload: Workload) -> Totals:
    """The workload totals of the scored variant (what the one-line estimate needs)."""
    variant = choice.worst
    total = variant.total
    step = variant.pricing.step
    return Totals(
        workload=workload.name,
        workload_description=workload.description,
        layers=step.layers,
        layers_known=step.layers_known,
        calls_per_step=step.calls,
        sites_per_step=dict(step.sites),
        measured_share=total.measured_weight,
        priced_tokens=tuple(cost.tokens for cost in total.steps if cost.default_us is not None),
        workload_steps=tuple(workload.steps),
        default_us=total.default_us,
        plan_us=total.plan_us,
        per_call={
            pattern: (total.per_call(pattern, 0), total.per_call(pattern, 1))
            for pattern, count in step.sites.items()
            if count
        },
    )


@dataclass(frozen=True)
class Explanation:
    """Everything ``--explain`` says past the range rows: the totals, the knobs, how many other knob
    sets were refused, the step per workload token count, the size that binds, the default paths not
    measured and what a missing measurement could unlock."""

    totals: Totals
    knobs: Knobs
    refused: int
    steps: tuple[StepFigure, ...] = ()
    binding: StepFigure | None = None
    unmeasured: tuple[Unmeasured, ...] = ()
    unlock: UnlockFigure | None = None

    def to_json(self) -> dict[str, Any]:
        """``--format json``'s ``price``: the figures only (``explain_words`` writes the sentences)."""
        return {
            **self.totals.to_json(),
            "knobs": knob_words(self.knobs),
            "refused": self.refused,
            "steps": [step.to_json() for step in self.steps],
            "binding": None if self.binding is None else self.binding.to_json(),
            "unmeasured": [entry.to_json() for entry in self.unmeasured],
            "unlock": None if self.unlock is None else self.unlock.to_json(),
        }


def explanation(choice: Choice, workload: Workload, launcher: str = "") -> Explanation:
    """The figures of ``--explain`` for a priced choice. ``launcher`` names the launcher whose untimed
    default paths have a known cause and fix ("": only the causes every launcher shares)."""
    return Explanation(
        totals=workload_totals(choice, workload),
        knobs=choice.candidate.knobs,
        refused=len(choice.rejected),
        steps=steps(choice, workload),
        binding=binding_step(choice),
        unmeasured=unmeasured(choice, launcher, workload),
        unlock=unlock_figure(choice.unlock, choice.worst.pricing.row_bytes),
    )


def knob_words(knobs: Knobs) -> str:
    """A knob set as a user sets it: flags, then ``KEY=VALUE``, then config keys (empty: no knobs).
    Here, not in the words, as the JSON carries it: it is the knob set in the user's own spelling."""
    config = ", ".join(f"{key}: {value}" for key, value in knobs.config.items())
    return " ".join(
        [*knobs.args, *(f"{k}={v}" for k, v in knobs.env.items()), *([f"{{{config}}}"] if config else [])]
    )
