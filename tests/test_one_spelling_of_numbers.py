"""One spelling of a speed-up, a price in microseconds and a percentage: every one is written by
``topo_gate/_units.py`` and its one rounding rule, so a stored 1.085 cannot read 1.09x on one screen
and 1.08x on another. This scans the package's source for a format spec that writes such a figure
itself, and fails when one is added outside ``_units.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "topo_gate"
NUMBERS = PACKAGE / "_units.py"

#: A replacement field with a fixed-point format (``{x:.2f}``, ``{x:+.1f}``) and what follows it: an
#: ``x`` makes it a speed-up, ``us`` a price; a percent format (``{x:+.1%}``) is a percentage itself.
FIXED = r"\{[^{}]*:[+ ]?\.\d+f\}"
SECOND_SPELLINGS = {
    "a speed-up": re.compile(FIXED + "x"),
    "a price in microseconds": re.compile(FIXED + r"\s*us\b"),
    "a percentage": re.compile(r"\{[^{}]*:[+ ]?\.\d+%\}"),
}


def _found(source: str) -> list[tuple[str, str]]:
    return [
        (what, match.group(0))
        for what, pattern in SECOND_SPELLINGS.items()
        for match in pattern.finditer(source)
    ]


def test_the_scan_finds_each_kind_of_second_spelling() -> None:
    # The patterns the test below must catch, one of each, and what it must leave alone.
    assert [what for what, _ in _found('f"{ratio:.2f}x"')] == ["a speed-up"]
    assert [what for what, _ in _found('f"{r:.3f}x"')] == ["a speed-up"]
    assert [what for what, _ in _found('f"{cost:.1f} us per replay"')] == ["a price in microseconds"]
    assert [what for what, _ in _found('f"({change:+.1%})"')] == ["a percentage"]
    assert _found('f"{seconds:.1f} s, {count:g}x, {speedup_text(v)}"') == []


def test_no_module_but_units_writes_a_speedup_a_price_or_a_percentage_itself() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {what}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != NUMBERS
        for what, text in _found(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "write these with topo_gate._units (one rounding rule):\n" + "\n".join(found)
