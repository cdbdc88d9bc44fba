"""Figure file names: one file per figure, on a case-insensitive file system too."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from topo_gate.report.figures import _name


def test_classes_that_differ_only_in_case_or_punctuation_get_different_files() -> None:
    names = {
        _name("latency", (2, group_class, "allreduce")).lower()
        for group_class in ("NVSwitch", "nvswitch", "nv switch", "nv/switch", "nv-switch")
    }
    assert len(names) == 5


def test_a_plain_class_keeps_its_readable_name() -> None:
    assert _name("latency", (2, "nvswitch", "allreduce")) == "latency-tp2-nvswitch-allreduce"


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_distinct_classes_never_share_a_name_ignoring_case(first: str, second: str) -> None:
    if first != second:
        key = "speedup", 4
        a = _name(key[0], (key[1], first, "allreduce")).lower()
        b = _name(key[0], (key[1], second, "allreduce")).lower()
        assert a != b
        assert "/" not in a and "\x00" not in a
