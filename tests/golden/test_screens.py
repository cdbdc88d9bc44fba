"""Each screen of cases.yaml, rendered through the real CLI, is its golden file to the character; a
mismatch shows the unified diff and the command that rewrites the goldens (after a change meant to
alter what people read)."""

from __future__ import annotations

import difflib

import pytest
from golden_screens import REGENERATE, REPO, Case, load_cases, not_this_machine, render


@pytest.mark.parametrize(
    "case",
    [pytest.param(case, id=case.id, marks=[pytest.mark.slow] if case.slow else []) for case in load_cases()],
)
def test_the_screen_is_its_golden_file(case: Case) -> None:
    why = not_this_machine(case)
    if why is not None:
        pytest.skip(why)
    shown = render(case)
    expected = case.golden.read_text(encoding="utf-8")
    if shown != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            shown.splitlines(keepends=True),
            str(case.golden.relative_to(REPO)),
            "rendered",
        )
        pytest.fail(
            f"{case.id} differs from its golden file:\n{''.join(diff)}\nIf the change is meant: {REGENERATE}"
        )
