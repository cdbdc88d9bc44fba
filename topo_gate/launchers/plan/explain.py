"""``recommend --explain``: the price of a plan against the launcher's default, per size range and per step.

Pure over a priced choice (``planning.Choice``). Each *range* row is one pattern's range of token
counts of the served model over which neither the plan's route nor the default's changes kernel and
which lies between the same two measured sizes; its prices are those of the measured size at the top
of the range (``costmodel``: median per call plus its buffer's expected size transition spread over
the step's calls in that buffer, in context where every compared path was timed there). Each *step*
row is one workload token count: the whole step, default and plan (``costmodel.step_check``), which
is what the constraint compares; the size where the plan comes closest to the default's limit is
named as the one that binds. Ranges whose default path was not measured say so (the plan leaves them
as they are, ``unmeasured``), and a candidate refused only for want of a measurement says what it
could save (``planning.Unlock``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from topo_gate._units import human_bytes
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


@dataclass(frozen=True)
class Row:
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
    def size(self) -> str:
        """The range's largest message: ``up to 14 MiB`` (``all larger`` for the open range)."""
        if self.last_tokens is None:
            return f"> {human_bytes((self.first_tokens - 1) * self.row_bytes)}"
        largest = human_bytes(self.last_tokens * self.row_bytes)
        return largest if self.first_tokens == self.last_tokens else f"up to {largest}"

    @property
    def saving_us(self) -> float | None:
        if self.default_us is None or self.plan_us is None:
            return None
        return self.default_us - self.plan_us

    @property
    def tokens(self) -> str:
        return (
            f"{self.first_tokens}+"
            if self.last_tokens is None
            else token_span(self.first_tokens, self.last_tokens)
        )

    def to_dict(self) -> dict[str, Any]:
        saving = self.saving_us
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
            "saving_us_per_call": _round(saving),
            "saving_us_per_step": _round(None if saving is None else saving * self.sites),
            "source": self.source,
            "note": self.note,
        }


def token_span(first: int, last: int) -> str:
    """``1-1024`` (``7`` for a single count)."""
    return str(first) if first == last else f"{first}-{last}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


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


def step_row(check: StepCheck, weight: float | None, row_bytes: int) -> dict[str, Any]:
    """One step as plain data: its size, both sides' us per step and the saving."""
    priced = check.complete and check.why is None
    return {
        "tokens": round(check.tokens, 3),
        "bytes": check.nbytes,
        "weight": None if weight is None else round(weight, 6),
        "default_us_per_step": _round(check.default_us) if check.complete else None,
        "plan_us_per_step": _round(check.plan_us) if priced else None,
        "limit_us_per_step": _round(check.limit_us) if check.complete else None,
        "saving_us_per_step": _round(check.default_us - check.plan_us) if priced else None,
        "changed": list(check.changed),
        "why": check.why,
        "size": human_bytes(check.nbytes, digits=6),
        "row_bytes": row_bytes,
    }


def steps(choice: Choice, workload: Workload) -> list[dict[str, Any]]:
    """The scored variant's whole step at each workload token count."""
    variant = choice.worst
    row_bytes = variant.pricing.row_bytes
    return [
        step_row(
            step_check(tokens * row_bytes, variant.plan, variant.default, variant.pricing), weight, row_bytes
        )
        for tokens, weight in workload.steps
    ]


def binding_row(choice: Choice) -> dict[str, Any] | None:
    """The checked size where the plan comes closest to the default's limit (None: no knobs)."""
    variant = choice.worst
    checks = step_checks(variant.plan, variant.default, variant.pricing)
    if isinstance(checks, Problem):
        return None
    found = binding([c for c in checks if c.changed and c.complete])
    return None if found is None else step_row(found, None, variant.pricing.row_bytes)


def unmeasured(choice: Choice, launcher: str, workload: Workload) -> list[dict[str, Any]]:
    """The default paths with no price at the workload's sizes, with the cause and the action."""
    variant = choice.worst
    row_bytes = variant.pricing.row_bytes
    found: dict[tuple[str, bool], dict[str, Any]] = {}
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
            entry = found.setdefault(
                (name, beyond), {"path": name, "tokens": [tokens, tokens], "patterns": [], "beyond": beyond}
            )
            entry["tokens"] = [min(entry["tokens"][0], tokens), max(entry["tokens"][1], tokens)]
            entry.setdefault("weights", {})[tokens] = weight
            if pattern not in entry["patterns"]:
                entry["patterns"].append(pattern)
            words = None if beyond else unmeasured_words(name, launcher)
            entry["runs"], entry["why"], entry["action"] = words or (
                f"the default runs {name}",
                "beyond the largest measured size" if beyond else "the profile has no price for it",
                "re-probe this node with sizes that cover the workload" if beyond else "re-probe this node",
            )
            found_cause = None if beyond else cause(name, launcher)
            entry["setting"] = "" if found_cause is None else setting_words(found_cause)
    return _merged(list(found.values()))


def _merged(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per cause: two paths untimed for the same reason with the same fix (plain and fused)
    are said once, ``runs`` naming both; ``share`` is the part of the workload's steps they cover."""
    merged: dict[tuple[bool, str, str], dict[str, Any]] = {}
    for entry in entries:
        key = (entry["beyond"], entry["why"], entry["action"])
        found = merged.get(key)
        if found is None:
            merged[key] = entry
            continue
        found["runs"] = found["runs"].replace(" here by default", f" and {entry['path']} here by default", 1)
        found["tokens"] = [
            min(found["tokens"][0], entry["tokens"][0]),
            max(found["tokens"][1], entry["tokens"][1]),
        ]
        found["patterns"] += [p for p in entry["patterns"] if p not in found["patterns"]]
        found["weights"] |= entry["weights"]
    for entry in merged.values():
        entry["share"] = round(sum(entry.pop("weights").values()), 6)  # of the workload's steps
    return list(merged.values())


def unlock_data(unlock: Unlock | None, row_bytes: int) -> dict[str, Any] | None:
    """What a missing measurement could unlock, as plain data (None: nothing could)."""
    if unlock is None:
        return None
    knobs = unlock.candidate.knobs
    return {
        "args": list(knobs.args),
        "env": dict(knobs.env),
        "config": dict(knobs.config),
        "saving_us_per_step": _round(unlock.saving_us),
        "saving": round(unlock.saving_us / unlock.default_us, 6) if unlock.default_us else None,
        "kernel": unlock.kernel,
        "after_bytes": unlock.largest_prior,
        "after_tokens": round(unlock.largest_prior / row_bytes, 3),
        "at_tokens": round(unlock.check.tokens, 3),
        "at_most_us": _round(unlock.threshold_us),
        "bounded_by_bytes": unlock.bounded_by,
    }


def workload_totals(choice: Choice, workload: Workload) -> dict[str, Any]:
    """The workload totals of the scored variant, as plain data (what ``estimate_line`` needs)."""
    variant = choice.worst
    total = variant.total
    step = variant.pricing.step
    default_us, plan_us = total.default_us, total.plan_us
    return {
        "workload": workload.name,
        "workload_description": workload.description,
        "layers": step.layers,
        "layers_known": step.layers_known,
        "calls_per_step": step.calls,
        "sites_per_step": dict(step.sites),
        "measured_share": round(total.measured_weight, 6),
        "priced_tokens": [step.tokens for step in total.steps if step.default_us is not None],
        "workload_steps": [[tokens, round(weight, 6)] for tokens, weight in workload.steps],
        "default_us_per_step": _round(default_us),
        "plan_us_per_step": _round(plan_us),
        "saving": None if not default_us or plan_us is None else round(1 - plan_us / default_us, 6),
        "per_call": {
            pattern: {
                "default_us": _round(total.per_call(pattern, 0)),
                "plan_us": _round(total.per_call(pattern, 1)),
            }
            for pattern, count in step.sites.items()
            if count
        },
    }


def totals(choice: Choice, workload: Workload, launcher: str = "") -> dict[str, Any]:
    """``workload_totals``, and the per-step rows, the size that binds, the default paths not
    measured and what a missing measurement could unlock, as plain data (``--explain``, the JSON)."""
    data = {
        **workload_totals(choice, workload),
        "knobs": knob_words(choice.candidate.knobs),
        "refused": len(choice.rejected),
        "steps": steps(choice, workload),
        "binding": binding_row(choice),
        "unmeasured": unmeasured(choice, launcher, workload),
        "unlock": unlock_data(choice.unlock, choice.worst.pricing.row_bytes),
    }
    return {"summary": summary_line(data), **data}


def knob_words(knobs: Knobs) -> str:
    """A knob set as a user sets it: flags, then ``KEY=VALUE``, then config keys (empty: no knobs)."""
    config = ", ".join(f"{key}: {value}" for key, value in knobs.config.items())
    return " ".join(
        [*knobs.args, *(f"{k}={v}" for k, v in knobs.env.items()), *([f"{{{config}}}"] if config else [])]
    )


def summary_line(data: dict[str, Any]) -> str:
    """``--explain``'s first line: what the plan is and the one cause that binds it, with the fix.

    An unmeasured default path binds first (a plan never replaces one), then a saving refused only
    for want of a measurement; a plan with knobs names the size where it comes closest to the
    default's limit."""
    found = [entry for entry in data.get("unmeasured") or [] if not entry.get("beyond")]
    beyond = [entry for entry in data.get("unmeasured") or [] if entry.get("beyond")]
    spans = list(dict.fromkeys(token_span(*e["tokens"]) for e in beyond))
    uncovered = (
        f"; the steps at {' and '.join(spans)} tokens lie beyond the largest measured size and are left as they are"
        if beyond
        else ""
    )
    if not data["knobs"] and found:
        first, last = found[0]["tokens"]
        others = len(found) - 1
        more = f" (and {others} more cause{'s' if others > 1 else ''} below)" if others else ""
        return (
            f"no knobs, because {found[0]['runs']} at {token_span(first, last)} tokens of the "
            f"workload, which is not measured: {found[0]['why']}{more}. Fix: {found[0]['action']}{uncovered}."
        )
    unlock = data.get("unlock")
    if not data["knobs"] and unlock is not None:
        knobs = knob_words(Knobs(tuple(unlock["args"]), unlock["env"]))
        return (
            f"no knobs, because {knobs} is refused only for want of one measurement: {unlock['kernel']}'s "
            f"size transition after {_tokens(unlock['after_tokens'])}. Fix: re-probe this node to measure "
            f"it (see 'could unlock' below){uncovered}."
        )
    if not data["knobs"]:
        return (
            "no knobs: the launcher's default is the fastest measured choice over the workload; each of the "
            f"{data['refused']} other knob sets is slower than it beyond noise at some step size{uncovered}."
        )
    found_binding = data.get("binding")
    binds = (
        ""
        if found_binding is None
        else f"; it comes closest to the default's limit at {_tokens(found_binding['tokens'])} ({found_binding['size']})"
    )
    saving = "" if data["saving"] is None else f" (est. {-data['saving']:+.1%} all-reduce time per step)"
    return f"plan: {data['knobs']}{saving}{binds}{uncovered}."


#: Below this share of the workload's steps priced, a per-step figure describes the exception, not
#: the workload: the one-line estimate gives none.
MIN_PRICED_SHARE = 0.5


def estimate_line(choice: Choice, workload: Workload, launcher: str = "") -> str:
    """The one line ``recommend``, ``exec`` and the plugins print: what the plan is, the cause that
    binds it and the fix in a few words (``--explain``'s first line says them in full), then the
    price, the share of the workload's steps it covers first. ``launcher`` names the launcher whose
    untimed default paths have a known cause and fix ("": only the causes every launcher shares)."""
    data = workload_totals(choice, workload)
    knobs = knob_words(choice.candidate.knobs)
    named = _summary_cause({"knobs": knobs, "unmeasured": unmeasured(choice, launcher, workload)})
    price = _step_price(data, workload.name)
    if knobs:
        return f"plan: {knobs}: {price}"
    if named is not None:
        first, last = named["tokens"]
        fix = named["setting"] or named["action"]
        return (
            f"no knobs: {named['runs']} at {token_span(first, last)} tokens ({named['share']:.0%} of the "
            f"workload's steps), which is not measured. Fix: {fix} (recommend --explain says why and how "
            f"to measure the change); {price}"
        )
    if data["default_us_per_step"] is None:
        return f"no knobs: {price}"
    return f"no knobs: nothing measured beats the launcher's default by more than noise; {price}"


def _step_price(data: dict[str, Any], workload: str) -> str:
    """The per-step price over the workload, the share of its steps it covers first; no per-step
    figure below ``MIN_PRICED_SHARE``."""
    share, default_us, plan_us = data["measured_share"], data["default_us_per_step"], data["plan_us_per_step"]
    layers = f"{data['layers']} layers" + ("" if data["layers_known"] else " assumed")
    if default_us is None:
        return f"the default's paths were not measured at any of the workload '{workload}' sizes"
    if share < MIN_PRICED_SHARE:
        return (
            f"only {share:.0%} of the workload '{workload}' steps could be priced: no per-step figure "
            "(recommend --explain shows each step)"
        )
    covered = (
        f"over the workload '{workload}'"
        if share >= 0.999
        else f"on the {share:.0%} of the workload '{workload}' steps that could be priced"
    )
    if data["saving"] is None or plan_us is None or plan_us == default_us:
        return f"{covered}: {default_us:.1f} us of all-reduce per step ({layers})"
    return (
        f"{covered}: est. {-data['saving']:+.1%} all-reduce time vs default "
        f"({default_us:.1f} -> {plan_us:.1f} us per step, {layers})"
    )


def priced_share(data: dict[str, Any]) -> str:
    """Which steps a per-step figure covers, when not all of the workload's could be priced: the
    priced token counts when they are one or two (``, per 8192-token step only: the 5% of steps that
    could be priced``), else the ones left out."""
    share = data["measured_share"]
    if share >= 0.999:
        return ""
    priced = data.get("priced_tokens") or []
    if 0 < len(priced) <= 2:
        which = " or ".join(map(str, priced))
        return f", per {which}-token step only: the {share:.0%} of steps that could be priced"
    left_out = [tokens for tokens, _ in data.get("workload_steps") or [] if tokens not in priced]
    counts = "-, ".join(map(str, left_out[:-1])) + ("- and " if len(left_out) > 1 else "") + str(left_out[-1])
    return (
        f", per step without the {counts}-token steps ({1 - share:.0%} of steps), which could not be priced"
    )


def render(table_rows: Sequence[Row], data: dict[str, Any], width: int | None = None) -> str:
    """Plain text: the summary line and the headline (why the plan is what it is), one line per size
    range, the whole step at each workload token count, the size that binds, then the workload total.

    ``width``: the terminal's. Prose wraps to it, and a range table wider than it is printed as one
    stacked entry per range instead of cut columns; None: one line each, as wide as it comes."""
    head = (
        "pattern",
        "tokens",
        "size",
        "default runs",
        "us/call",
        "plan runs",
        "us/call",
        "saving/call",
        "saving/step",
        "priced",
        "note",
    )
    lines = [head]
    for row in table_rows:
        saving = row.saving_us
        lines.append(
            (
                row.pattern,
                row.tokens,
                row.size,
                row.default,
                _us(row.default_us),
                row.plan,
                _us(row.plan_us),
                _us(saving, signed=True),
                _us(None if saving is None else saving * row.sites, signed=True),
                row.source,
                row.note,
            )
        )
    ranges = _table(lines)
    if width is not None and max(map(len, ranges)) > width:
        ranges = [line for row in table_rows for line in _wrapped(_stacked(row), width)]
    steps_part = _step_lines(data)
    prose = [data["summary"], *headline(data)]
    if width is not None:
        prose = [line for text in prose for line in _wrapped(text, width)]
        steps_part = [
            wrapped for line in steps_part for wrapped in ([line] if "  " in line else _wrapped(line, width))
        ]
    total = _total_words(data)
    return "\n".join([*prose, "", *ranges, "", *steps_part, *(_wrapped(total, width) if width else [total])])


def _stacked(row: Row) -> str:
    """One range as one entry, for a terminal narrower than the table."""
    saving = row.saving_us
    per_step = "" if saving is None else f", saving {saving:+.2f} us/call, {saving * row.sites:+.2f} us/step"
    return (
        f"{row.pattern} {row.tokens} token{'' if row.tokens == '1' else 's'} ({row.size}): default {row.default} {_us(row.default_us)} us/call, "
        f"plan {row.plan} {_us(row.plan_us)} us/call{per_step} [{row.source}]: {row.note}"
    )


def _wrapped(text: str, width: int | None) -> list[str]:
    if width is None:
        return [text]
    return textwrap.wrap(
        text, width=max(width, 40), subsequent_indent="  ", break_on_hyphens=False, break_long_words=False
    ) or [""]


def _table(lines: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]


def _summary_cause(data: dict[str, Any]) -> dict[str, Any] | None:
    """The unmeasured default path ``summary_line`` names as the cause (None: it names none)."""
    if data.get("knobs"):
        return None
    return next((entry for entry in data.get("unmeasured") or [] if not entry.get("beyond")), None)


def headline(data: dict[str, Any]) -> list[str]:
    """What binds the plan and what would change it, first: the default paths that were not measured
    (with the action that measures them), and a saving a missing measurement could unlock."""
    out = []
    named = _summary_cause(data)
    for entry in data.get("unmeasured") or []:
        if entry is named:
            continue  # the summary line says it, with its fix
        first, last = entry["tokens"]
        span = token_span(first, last)
        out.append(
            f"not measured: {entry['runs']} at {span} tokens of this workload ({entry['why']}): "
            f"left as it is. To plan there: {entry['action']}."
        )
    unlock = data.get("unlock")
    if unlock is not None:
        knobs = knob_words(Knobs(tuple(unlock["args"]), unlock["env"]))
        bound = unlock["bounded_by_bytes"]
        today = (
            "nothing measured after a larger size"
            if bound is None
            else f"bounded today by the one after {human_bytes(bound, digits=6)}"
        )
        saving = "" if unlock["saving"] is None else f" ({-unlock['saving']:+.1%})"
        out.append(
            f"could unlock: {knobs}: up to {-unlock['saving_us_per_step']:+.1f} us/step{saving} over the workload "
            f"if {unlock['kernel']}'s size transition after {_tokens(unlock['after_tokens'])} "
            f"({human_bytes(unlock['after_bytes'], digits=6)}) is at most {unlock['at_most_us']:.1f} us at each "
            f"smaller size not yet timed after it (binding at {_tokens(unlock['at_tokens'])}; {today}); re-probe this node with evidence v1.2 "
            "(`topo-gate probe` with the served --model) to measure it."
        )
    return out


def _tokens(count: float) -> str:
    shown = f"{count:g}"
    return f"{shown} token" + ("" if shown == "1" else "s")


def _step_lines(data: dict[str, Any]) -> list[str]:
    """The whole step per workload token count, and the size that binds."""
    sites = data.get("sites_per_step") or {}
    what = " + ".join(f"{count} {pattern}" for pattern, count in sites.items() if count)
    lines = [("tokens", "size", "weight", "default us/step", "plan us/step", "saving/step", "note")]
    for run in _unpriced_runs(data.get("steps") or []):
        first, last = run[0], run[-1]
        lines.append(
            (
                f"{first['tokens']:g}" + ("" if len(run) == 1 else f"-{last['tokens']:g}"),
                last["size"],  # the largest message of the run, as a range row's size is
                f"{sum(row['weight'] or 0.0 for row in run):.1%}",
                _us(first["default_us_per_step"]),
                _us(first["plan_us_per_step"]),
                _us(first["saving_us_per_step"], signed=True),
                first["why"] or ("same paths" if not first["changed"] else ""),
            )
        )
    out = [f"per step (a step: {what} all-reduces, plus each buffer's transition once):", *_table(lines)]
    found = data.get("binding")
    if found is not None:
        out.append(
            f"binds at {_tokens(found['tokens'])} ({found['size']}): plan {found['plan_us_per_step'] or 0:.1f} "
            f"us/step against the default's {found['default_us_per_step']:.1f} (limit "
            f"{found['limit_us_per_step']:.1f}: its CI high plus its own transitions)"
            + (f"; {found['why']}" if found["why"] else "")
        )
    return out


#: Fewer unpriced neighbours than this stay rows of their own: a folded row's token range is wider
#: than one count, and two rows are read at a glance.
MIN_FOLDED_ROWS = 3


def _unpriced_runs(rows: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The step rows in order, each run of ``MIN_FOLDED_ROWS`` or more neighbours that no side could
    price (every figure n/a, the same note) folded into one: ten rows of n/a say less than one row of
    their token range."""
    runs: list[list[dict[str, Any]]] = []
    for row in rows:
        unpriced = row["default_us_per_step"] is None and row["plan_us_per_step"] is None
        previous = runs[-1][-1] if runs else None
        if (
            unpriced
            and previous is not None
            and previous["default_us_per_step"] is None
            and previous["plan_us_per_step"] is None
            and (previous["why"], previous["changed"]) == (row["why"], row["changed"])
        ):
            runs[-1].append(row)
        else:
            runs.append([row])
    return [
        piece for run in runs for piece in ([run] if len(run) >= MIN_FOLDED_ROWS else [[row] for row in run])
    ]


def _us(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _total_words(data: dict[str, Any]) -> str:
    default_us, plan_us = data["default_us_per_step"], data["plan_us_per_step"]
    if default_us is None:
        return f"workload '{data['workload']}': the default's paths were not measured at its sizes; nothing changed"
    per_call = ", ".join(
        f"{pattern} {values['default_us']:.2f} -> {values['plan_us']:.2f} us/call"
        for pattern, values in data["per_call"].items()
        if values["default_us"] is not None
    )
    return (
        f"workload '{data['workload']}' ({data['workload_description']}; {data['layers']} layers"
        f"{'' if data['layers_known'] else ' assumed'}, {data['calls_per_step']} all-reduces per step"
        f"{priced_share(data)}): default {default_us:.1f} -> plan {plan_us:.1f} us per step "
        f"({-data['saving']:+.1%}); {per_call}"
    )
