"""``recommend --explain``'s words: the summary line, the headline, the range and step tables and the
workload total, and the one-line estimate ``recommend``, ``exec`` and the plugins print, rendered from
``explain``'s figures. Every number is written by ``_units`` (one rounding rule).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from topo_gate._units import human_bytes, percent_text, us_text
from topo_gate.launchers.plan.choice import Choice
from topo_gate.launchers.plan.explain import (
    Explanation,
    Row,
    StepFigure,
    Totals,
    UnlockFigure,
    Unmeasured,
    knob_words,
    unmeasured,
    workload_totals,
)
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Knobs

#: Below this share of the workload's steps priced, a per-step figure describes the exception, not
#: the workload: the one-line estimate gives none.
MIN_PRICED_SHARE = 0.5

#: Fewer unpriced neighbours than this stay rows of their own: a folded row's token range is wider
#: than one count, and two rows are read at a glance.
MIN_FOLDED_ROWS = 3

#: A share at least this close to the whole is the whole: a workload's weights are kept to six
#: decimals, and their sum may miss 1 in the last of them.
WHOLE_SHARE = 0.999

#: A table's cells and a price per call read to two decimals (the columns line up); a step's total in
#: a sentence to one: a step is hundreds of calls, and its hundredths are below the noise of any one.
CELL_PLACES = 2
STEP_PLACES = 1


def token_span(first: int, last: int) -> str:
    """``1-1024`` (``7`` for a single count)."""
    return str(first) if first == last else f"{first}-{last}"


def row_tokens(row: Row) -> str:
    """A range's token counts: ``1-1024``, ``7``, ``9+`` for the open range."""
    return (
        f"{row.first_tokens}+" if row.last_tokens is None else token_span(row.first_tokens, row.last_tokens)
    )


def row_size(row: Row) -> str:
    """The range's largest message: ``up to 14 MiB`` (``> 14 MiB`` for the open range)."""
    if row.last_tokens is None:
        return f"> {human_bytes((row.first_tokens - 1) * row.row_bytes)}"
    largest = human_bytes(row.last_tokens * row.row_bytes)
    return largest if row.first_tokens == row.last_tokens else f"up to {largest}"


def _cell_us(value: float | None, *, signed: bool = False) -> str:
    return us_text(value, CELL_PLACES, signed=signed)


def _step_us(value: float | None, *, signed: bool = False) -> str:
    return us_text(value, STEP_PLACES, signed=signed)


def _tokens(count: float) -> str:
    shown = f"{count:g}"
    return f"{shown} token" + ("" if shown == "1" else "s")


def _saving_percent(saving: float) -> str:
    """A saving as the change in time it is: a 1.2% saving reads ``-1.2%``."""
    return percent_text(-saving, signed=True)


def summary_line(explained: Explanation) -> str:
    """``--explain``'s first line: what the plan is and the one cause that binds it, with the fix.

    An unmeasured default path binds first (a plan never replaces one), then a saving refused only
    for want of a measurement; a plan with knobs names the size where it comes closest to the
    default's limit."""
    knobs = knob_words(explained.knobs)
    found = [entry for entry in explained.unmeasured if not entry.beyond]
    beyond = [entry for entry in explained.unmeasured if entry.beyond]
    spans = list(dict.fromkeys(token_span(*e.tokens) for e in beyond))
    uncovered = (
        f"; the steps at {' and '.join(spans)} tokens lie beyond the largest measured size and are left as they are"
        if beyond
        else ""
    )
    if not knobs and found:
        others = len(found) - 1
        more = f" (and {others} more cause{'s' if others > 1 else ''} below)" if others else ""
        return (
            f"no knobs, because {found[0].runs} at {token_span(*found[0].tokens)} tokens of the "
            f"workload, which is not measured: {found[0].why}{more}. Fix: {found[0].action}{uncovered}."
        )
    unlock = explained.unlock
    if not knobs and unlock is not None:
        return (
            f"no knobs, because {_unlock_knobs(unlock)} is refused only for want of one measurement: "
            f"{unlock.kernel}'s size transition after {_tokens(unlock.after_tokens)}. Fix: re-probe this "
            f"node to measure it (see 'could unlock' below){uncovered}."
        )
    if not knobs:
        return (
            "no knobs: the launcher's default is the fastest measured choice over the workload; each of the "
            f"{explained.refused} other knob sets is slower than it beyond noise at some step size{uncovered}."
        )
    found_binding = explained.binding
    binds = (
        ""
        if found_binding is None
        else f"; it comes closest to the default's limit at {_tokens(found_binding.tokens)} ({found_binding.size})"
    )
    saving = explained.totals.saving
    price = "" if saving is None else f" (est. {_saving_percent(saving)} all-reduce time per step)"
    return f"plan: {knobs}{price}{binds}{uncovered}."


def _unlock_knobs(unlock: UnlockFigure) -> str:
    """The flags and env an unlock would admit, as the user sets them."""
    return knob_words(Knobs(unlock.knobs.args, unlock.knobs.env))


def estimate_line(choice: Choice, workload: Workload, launcher: str = "") -> str:
    """The one line ``recommend``, ``exec`` and the plugins print: what the plan is, the cause that
    binds it and the fix in a few words (``--explain``'s first line says them in full), then the
    price, the share of the workload's steps it covers first. ``launcher`` names the launcher whose
    untimed default paths have a known cause and fix ("": only the causes every launcher shares)."""
    totals = workload_totals(choice, workload)
    knobs = knob_words(choice.candidate.knobs)
    price = _step_price(totals)
    if knobs:
        return f"plan: {knobs}: {price}"
    named = _summary_cause(knobs, unmeasured(choice, launcher, workload))
    if named is not None:
        fix = named.setting or named.action
        return (
            f"no knobs: {named.runs} at {token_span(*named.tokens)} tokens ({percent_text(named.share, 0)} of "
            f"the workload's steps), which is not measured. Fix: {fix} (recommend --explain says why and how "
            f"to measure the change); {price}"
        )
    if totals.default_us is None:
        return f"no knobs: {price}"
    return f"no knobs: nothing measured beats the launcher's default by more than noise; {price}"


def _layers(totals: Totals) -> str:
    return f"{totals.layers} layers" + ("" if totals.layers_known else " assumed")


def _step_price(totals: Totals) -> str:
    """The per-step price over the workload, the share of its steps it covers first; no per-step
    figure below ``MIN_PRICED_SHARE``."""
    share, default_us, plan_us, workload = (
        totals.measured_share,
        totals.default_us,
        totals.plan_us,
        totals.workload,
    )
    if default_us is None:
        return f"the default's paths were not measured at any of the workload '{workload}' sizes"
    if share < MIN_PRICED_SHARE:
        return (
            f"only {percent_text(share, 0)} of the workload '{workload}' steps could be priced: no per-step "
            "figure (recommend --explain shows each step)"
        )
    covered = (
        f"over the workload '{workload}'"
        if share >= WHOLE_SHARE
        else f"on the {percent_text(share, 0)} of the workload '{workload}' steps that could be priced"
    )
    saving = totals.saving
    if saving is None or plan_us is None or plan_us == default_us:
        return f"{covered}: {_step_us(default_us)} us of all-reduce per step ({_layers(totals)})"
    return (
        f"{covered}: est. {_saving_percent(saving)} all-reduce time vs default "
        f"({_step_us(default_us)} -> {_step_us(plan_us)} us per step, {_layers(totals)})"
    )


def priced_share(totals: Totals) -> str:
    """Which steps a per-step figure covers, when not all of the workload's could be priced: the
    priced token counts when they are one or two (``, per 8192-token step only: the 5% of steps that
    could be priced``), else the ones left out."""
    share = totals.measured_share
    if share >= WHOLE_SHARE:
        return ""
    priced = totals.priced_tokens
    if 0 < len(priced) <= 2:
        which = " or ".join(map(str, priced))
        return f", per {which}-token step only: the {percent_text(share, 0)} of steps that could be priced"
    left_out = [tokens for tokens, _ in totals.workload_steps if tokens not in priced]
    counts = "-, ".join(map(str, left_out[:-1])) + ("- and " if len(left_out) > 1 else "") + str(left_out[-1])
    return (
        f", per step without the {counts}-token steps ({percent_text(1 - share, 0)} of steps), which could "
        "not be priced"
    )


def render(table_rows: Sequence[Row], explained: Explanation, width: int | None = None) -> str:
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
        lines.append(
            (
                row.pattern,
                row_tokens(row),
                row_size(row),
                row.default,
                _cell_us(row.default_us),
                row.plan,
                _cell_us(row.plan_us),
                _cell_us(row.saving_us, signed=True),
                _cell_us(row.saving_us_per_step, signed=True),
                row.source,
                row.note,
            )
        )
    ranges = _table(lines)
    if width is not None and max(map(len, ranges)) > width:
        ranges = [line for row in table_rows for line in _wrapped(_stacked(row), width)]
    steps_part = _step_lines(explained)
    prose = [summary_line(explained), *headline(explained)]
    if width is not None:
        prose = [line for text in prose for line in _wrapped(text, width)]
        steps_part = [
            wrapped for line in steps_part for wrapped in ([line] if "  " in line else _wrapped(line, width))
        ]
    total = _total_words(explained.totals)
    return "\n".join([*prose, "", *ranges, "", *steps_part, *(_wrapped(total, width) if width else [total])])


def _stacked(row: Row) -> str:
    """One range as one entry, for a terminal narrower than the table."""
    saving = row.saving_us
    per_step = (
        ""
        if saving is None
        else f", saving {_cell_us(saving, signed=True)} us/call, "
        f"{_cell_us(row.saving_us_per_step, signed=True)} us/step"
    )
    tokens = row_tokens(row)
    return (
        f"{row.pattern} {tokens} token{'' if tokens == '1' else 's'} ({row_size(row)}): default {row.default} "
        f"{_cell_us(row.default_us)} us/call, plan {row.plan} {_cell_us(row.plan_us)} us/call{per_step} "
        f"[{row.source}]: {row.note}"
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


def _summary_cause(knobs: str, entries: Sequence[Unmeasured]) -> Unmeasured | None:
    """The unmeasured default path the summary line names as the cause (None: it names none)."""
    if knobs:
        return None
    return next((entry for entry in entries if not entry.beyond), None)


def headline(explained: Explanation) -> list[str]:
    """What binds the plan and what would change it, first: the default paths that were not measured
    (with the action that measures them), and a saving a missing measurement could unlock."""
    out = []
    named = _summary_cause(knob_words(explained.knobs), explained.unmeasured)
    for entry in explained.unmeasured:
        if entry is named:
            continue  # the summary line says it, with its fix
        out.append(
            f"not measured: {entry.runs} at {token_span(*entry.tokens)} tokens of this workload ({entry.why}): "
            f"left as it is. To plan there: {entry.action}."
        )
    if explained.unlock is not None:
        out.append(unlock_words(explained.unlock))
    return out


def unlock_words(unlock: UnlockFigure) -> str:
    """``could unlock: ...``: the knobs a missing measurement could admit, what they would save, and
    the measurement that admits them."""
    bound = unlock.bounded_by_bytes
    today = (
        "nothing measured after a larger size"
        if bound is None
        else f"bounded today by the one after {human_bytes(bound, digits=6)}"
    )
    saving = "" if unlock.saving is None else f" ({_saving_percent(unlock.saving)})"
    return (
        f"could unlock: {_unlock_knobs(unlock)}: up to {_step_us(-unlock.saving_us, signed=True)} us/step{saving} "
        f"over the workload if {unlock.kernel}'s size transition after {_tokens(unlock.after_tokens)} "
        f"({human_bytes(unlock.after_bytes, digits=6)}) is at most {_step_us(unlock.at_most_us)} us at each "
        f"smaller size not yet timed after it (binding at {_tokens(unlock.at_tokens)}; {today}); re-probe this "
        "node with evidence v1.2 "
        "(`topo-gate probe` with the served --model) to measure it."
    )


def _step_lines(explained: Explanation) -> list[str]:
    """The whole step per workload token count, and the size that binds."""
    sites = explained.totals.sites_per_step
    what = " + ".join(f"{count} {pattern}" for pattern, count in sites.items() if count)
    lines = [("tokens", "size", "weight", "default us/step", "plan us/step", "saving/step", "note")]
    for run in _unpriced_runs(explained.steps):
        first, last = run[0], run[-1]
        lines.append(
            (
                f"{first.tokens:g}" + ("" if len(run) == 1 else f"-{last.tokens:g}"),
                last.size,  # the largest message of the run, as a range row's size is
                percent_text(sum(step.weight or 0.0 for step in run)),
                _cell_us(first.default_us),
                _cell_us(first.plan_us),
                _cell_us(first.saving_us, signed=True),
                first.why or ("same paths" if not first.changed else ""),
            )
        )
    out = [f"per step (a step: {what} all-reduces, plus each buffer's transition once):", *_table(lines)]
    found = explained.binding
    if found is not None:
        out.append(
            f"binds at {_tokens(found.tokens)} ({found.size}): plan {_step_us(found.plan_us or 0.0)} "
            f"us/step against the default's {_step_us(found.default_us)} (limit "
            f"{_step_us(found.limit_us)}: its CI high plus its own transitions)"
            + (f"; {found.why}" if found.why else "")
        )
    return out


def _unpriced_runs(steps: Sequence[StepFigure]) -> list[list[StepFigure]]:
    """The steps in order, each run of ``MIN_FOLDED_ROWS`` or more neighbours that no side could price
    (every figure n/a, the same note) folded into one: ten rows of n/a say less than one row of their
    token range."""
    runs: list[list[StepFigure]] = []
    for step in steps:
        unpriced = step.default_us is None and step.plan_us is None
        previous = runs[-1][-1] if runs else None
        if (
            unpriced
            and previous is not None
            and previous.default_us is None
            and previous.plan_us is None
            and (previous.why, previous.changed) == (step.why, step.changed)
        ):
            runs[-1].append(step)
        else:
            runs.append([step])
    return [
        piece
        for run in runs
        for piece in ([run] if len(run) >= MIN_FOLDED_ROWS else [[step] for step in run])
    ]


def _total_words(totals: Totals) -> str:
    default_us, plan_us, saving = totals.default_us, totals.plan_us, totals.saving
    if default_us is None or plan_us is None or saving is None:
        return f"workload '{totals.workload}': the default's paths were not measured at its sizes; nothing changed"
    per_call = ", ".join(
        f"{pattern} {_cell_us(default)} -> {_cell_us(plan)} us/call"
        for pattern, (default, plan) in totals.per_call.items()
        if default is not None
    )
    return (
        f"workload '{totals.workload}' ({totals.workload_description}; {_layers(totals)}, "
        f"{totals.calls_per_step} all-reduces per step{priced_share(totals)}): default {_step_us(default_us)} "
        f"-> plan {_step_us(plan_us)} us per step ({_saving_percent(saving)}); {per_call}"
    )
