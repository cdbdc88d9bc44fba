"""The one way a speed-up and its confidence interval are written, wherever they are shown.

A profile stores speed-ups to three decimals; every display (``show``, ``probe``'s summary, the
reasons ``decide`` writes, the reader's own reasons) writes two, rounding half up from the stored
decimal value, so one figure never reads 1.08x in one place, 1.085x in another and 1.09x in a third.
Rounding is monotone, so a CI shown around its speed-up still contains it.
"""

from __future__ import annotations

from collections.abc import Sequence

STORED_DECIMALS = 3  # what decide keeps in a profile: more than a timing ratio carries


def stored(value: float) -> float:
    """``value`` as a profile stores it (three decimals)."""
    return round(value, STORED_DECIMALS)


def speedup_text(value: float) -> str:
    """``1.0853`` -> ``1.09x``."""
    return f"{_two_decimals(value)}x"


def ci_text(ci: Sequence[float]) -> str:
    """``(1.071, 1.102)`` -> ``1.07-1.10``."""
    low, high = ci
    return f"{_two_decimals(low)}-{_two_decimals(high)}"


def speedup_ci_text(value: float, ci: Sequence[float] | None) -> str:
    """``1.09x (CI 1.07-1.10)``; just ``1.09x`` without a CI."""
    return speedup_text(value) if ci is None else f"{speedup_text(value)} (CI {ci_text(ci)})"


def _two_decimals(value: float) -> str:
    from decimal import ROUND_HALF_UP, Decimal  # here: the reader formats only when it explains

    # From the stored decimal value (repr of the three-decimal float), not its binary expansion:
    # 1.085 is 1.08499999... in binary, and must still read 1.09 like the 1.0853 it came from.
    return str(Decimal(repr(stored(float(value)))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
