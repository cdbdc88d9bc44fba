"""Numbers on the command line: finite and in range, or a usage error (exit 2) that names the option.

click's ``FloatRange`` lets NaN through (every comparison with NaN is false, so no bound refuses it)
and both it and ``FLOAT`` take ``inf`` and ``1e400``: ``fleet outliers --threshold nan`` passed a
5x-slower node, ``probe --budget nan`` ignored the budget, ``decide --margin nan`` blamed the evidence
file. ``Finite`` is the CLI's float type, and ``harden`` puts it on every float option of every
command as the command is loaded (an option declared with click's own float types keeps its bounds
and gains the check), so no float option -- a new one included -- fails open. Integers are click's
``IntRange``: Python's ``int()`` refuses NaN, infinities and what is no integer (``²``, 5000 digits).
"""

from __future__ import annotations

import math
from typing import Any

import click

#: Bootstrap resamples per (backend, size): decide's cost grows linearly with them; 50x the default
#: 2000 is far past where the CI stops moving, and keeps a typo (``--bootstrap 20000000``) from
#: keeping decide busy for hours.
MAX_BOOTSTRAP = 100_000
#: NVML collection of a whole node takes seconds; a day is no timeout.
MAX_TIMEOUT_S = 86_400.0


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
