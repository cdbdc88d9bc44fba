"""Numbers on the command line: finite and in range, or a usage error (exit 2) that names the option.

click's ``FloatRange`` lets NaN through (every comparison with NaN is false, so no bound refuses it)
and both it and ``FLOAT`` take ``inf`` and ``1e400``: ``fleet outliers --threshold nan`` passed a
5x-slower node, ``probe --budget nan`` ignored the budget, ``decide --margin nan`` blamed the evidence
file. ``Finite`` is the CLI's float type, and ``harden`` puts it on every float option of every
command as the command is loaded (an option declared with click's own float types keeps its bounds
and gains the check), so no float option -- a new one included -- fails open. Integers are click's
``IntRange``: Python's ``int()`` refuses NaN, infinities and what is no integer (``²``, 5000 digits).

An integer option whose value ends up in a file or a reader's question has the range that file's
loader and the reader accept (``BOUNDS``, the one table): a probe of ``--rounds 1500`` would write
evidence its own ``decide`` refuses, ``--tp`` of 30 digits a profile no launcher can read. Checked
when the command line is parsed, before any work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import click

from topo_gate.ab.verdict import MIN_SUCCESSES
from topo_gate.evidence.limits import MAX_SERIES
from topo_gate.profile.reader import MAX_TP

#: Bootstrap resamples per (backend, size): decide's cost grows linearly with them; 50x the default
#: 2000 is far past where the CI stops moving, and keeps a typo (``--bootstrap 20000000``) from
#: keeping decide busy for hours.
MAX_BOOTSTRAP = 100_000
#: NVML collection of a whole node takes seconds; a day is no timeout.
MAX_TIMEOUT_S = 86_400.0


@dataclass(frozen=True)
class Bound:
    """An integer option's range, and where its upper end comes from."""

    low: int
    high: int
    why: str


#: The integer options whose values a loader or the reader reads back, with the loader's range.
BOUNDS = {
    "tp": Bound(1, MAX_TP, f"the reader answers TP sizes up to {MAX_TP}"),
    "rounds": Bound(15, MAX_SERIES, f"the evidence loader reads {MAX_SERIES} samples a series"),
    "ab-runs": Bound(MIN_SUCCESSES, MAX_SERIES, f"the A/B record's loader reads {MAX_SERIES} runs an arm"),
    "ab-warmup": Bound(0, MAX_SERIES, f"the A/B record's loader reads {MAX_SERIES} warm-ups an arm"),
}


def bounded(name: str) -> click.IntRange:
    """The click type of the integer option ``BOUNDS[name]``."""
    bound = BOUNDS[name]
    return click.IntRange(min=bound.low, max=bound.high)


def int_list(name: str, text: str, example: str) -> tuple[int, ...]:
    """``2,4,8``: comma-separated integers each in ``BOUNDS[name]``; ``click.BadParameter`` naming the
    range otherwise (the option is named by click)."""
    bound = BOUNDS[name]
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers like {example}, got {text!r}") from None
    if not values or not all(bound.low <= value <= bound.high for value in values):
        raise click.BadParameter(f"each must be an integer in {bound.low}..{bound.high} ({bound.why})")
    return values


class Finite(click.FloatRange):
    """A float within the range that is a number: NaN, infinities and overflowing text refused."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def finite_like(kind: click.ParamType) -> Finite | None:
    """The ``Finite`` for one of click's float types, bounds kept; None for any other type."""
    if isinstance(kind, Finite) or not isinstance(kind, click.types.FloatParamType):
        return None
    if isinstance(kind, click.FloatRange):
        return Finite(min=kind.min, max=kind.max, min_open=kind.min_open, max_open=kind.max_open)
    return Finite()


def harden(command: click.Command) -> click.Command:
    """``command`` (and every subcommand) with each float parameter typed ``Finite``; idempotent."""
    for param in command.params:
        replacement = finite_like(param.type)
        if replacement is not None:
            param.type = replacement
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            harden(sub)
    return command
