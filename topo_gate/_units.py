"""How numbers are written: sizes, speed-ups, microseconds and percentages, for every message, note,
report and table.

One rounding rule (``shown``): a figure is first the value the JSON and the profile keep (speed-ups
and microseconds to ``STORED_DECIMALS``, shares to ``SHARE_DECIMALS``), then rounded half up from
that decimal value to the digits a display shows. So a stored 1.085 reads 1.09x in ``show``,
``report.html`` and ``summary.md`` alike (formatting the binary float directly gives 1.08x, as
1.085 is 1.08499999... in binary), and a figure on a screen is always its JSON value rounded.
Rounding is monotone, so a CI shown around its speed-up still contains it.

Standard library only and importing nothing of the package, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Sequence

#: What decide keeps of a speed-up and the JSON of a time in microseconds: more than a timing ratio
#: or a median over repeats carries.
STORED_DECIMALS = 3
#: What the JSON keeps of a share (of a workload's steps, a saving against a default): a share is
#: shown as a percentage, and six decimals keep its tenths of a percent exact.
SHARE_DECIMALS = 6
#: A speed-up reads to two decimals: the third is within a trial's noise.
SPEEDUP_DECIMALS = 2


def human_bytes(nbytes: int, *, digits: int = 4) -> str:
    """``14336`` -> ``14 KiB``, ``1572864`` -> ``1.5 MiB``, ``100`` -> ``100 B``: the largest binary
    unit the size reaches (binary, as the sizes are), to ``digits`` significant digits.

    Four serve a decision's reasons and the reports. A launcher's limit takes six: its ``63.998 MiB``
    (one token under 64 MiB) must not read as the ``64 MiB`` beside it.
    """
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, step = float(nbytes), 0
    while value >= 1024 and step < len(units) - 1:
        value /= 1024
        step += 1
    return f"{value:.{digits}g} {units[step]}"


def stored(value: float) -> float:
    """``value`` as a profile or the JSON keeps it (three decimals)."""
    return round(value, STORED_DECIMALS)


def shown(value: float, places: int, *, keep: int = STORED_DECIMALS, signed: bool = False) -> str:
    """``value`` kept to ``keep`` decimals, then rounded half up to ``places``: the one rounding
    rule. ``signed``: a ``+`` before a positive figure (a saving, a change)."""
    from decimal import ROUND_HALF_UP, Decimal  # here: the profile reader formats only when it explains

    # From the kept decimal value (the repr of the rounded float), not its binary expansion.
    kept = Decimal(repr(round(float(value), keep)))
    text = format(kept.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP), "f")
    return "+" + text if signed and not text.startswith("-") else text


def speedup_text(value: float) -> str:
    """``1.0853`` -> ``1.09x``."""
    return f"{shown(value, SPEEDUP_DECIMALS)}x"


def stored_speedup_text(value: float) -> str:
    """``1.0853`` -> ``1.085x``: a speed-up to the decimals a profile keeps, where a check compares
    stored figures and two decimals could hide the difference it reports."""
    return f"{shown(value, STORED_DECIMALS)}x"


def ci_text(ci: Sequence[float]) -> str:
    """``(1.071, 1.102)`` -> ``1.07-1.10``."""
    low, high = ci
    return f"{shown(low, SPEEDUP_DECIMALS)}-{shown(high, SPEEDUP_DECIMALS)}"


def speedup_ci_text(value: float, ci: Sequence[float] | None) -> str:
    """``1.09x (CI 1.07-1.10)``; just ``1.09x`` without a CI."""
    return speedup_text(value) if ci is None else f"{speedup_text(value)} (CI {ci_text(ci)})"


def us_text(value: float | None, places: int = 2, *, signed: bool = False) -> str:
    """Microseconds: ``12.345`` -> ``12.35`` (``n/a`` when not measured). Two decimals per call,
    one per step (``places``), as the tables and lines that show them ask."""
    return "n/a" if value is None else shown(value, places, signed=signed)


def percent_text(share: float, places: int = 1, *, signed: bool = False) -> str:
    """A share as a percentage: ``0.0123`` -> ``1.2%`` (``+1.2%`` signed)."""
    kept = round(share, SHARE_DECIMALS)
    return shown(kept * 100, places, keep=SHARE_DECIMALS - 2, signed=signed) + "%"
