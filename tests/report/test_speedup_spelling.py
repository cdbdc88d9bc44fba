"""A stored speed-up reads the same in ``show``, ``report.html`` and ``summary.md``: 1.085 (a binary
1.08499...) is 1.09x in each, its CI rounded by the same rule."""

from __future__ import annotations

from topo_gate.profile.rules import Rule
from topo_gate.report import html_page, markdown, tables

RULE = Rule(max_bytes=1 << 20, backend="trtllm_oneshot", speedup=1.085, ci=(1.075, 1.105), reason="x")


def test_show_and_the_reports_write_a_stored_speedup_alike() -> None:
    assert tables._speedup_words(RULE) == "1.09x (CI 1.08-1.11)"
    assert html_page._speedup_words(RULE, cpu=False) == "1.09x (1.08-1.11)"
    assert html_page._x(1.085) == markdown._x(1.085) == "1.09x"
    assert html_page._x(None) == markdown._x(None) == "-"
