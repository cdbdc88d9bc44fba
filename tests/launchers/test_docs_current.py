"""docs/launchers.md's generated section is what the route models say today."""

from __future__ import annotations

from pathlib import Path

from topo_gate.launchers.plan.knob_docs import BEGIN, END, generated, rewrite

DOC = Path(__file__).resolve().parents[2] / "docs" / "launchers.md"


def test_launcher_doc_is_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert rewrite(text) == text, "regenerate: python -m topo_gate.launchers.plan.knob_docs docs/launchers.md"


def test_every_knob_row_cites_a_source_or_says_it_has_none() -> None:
    rows = [line for line in generated().splitlines() if line.startswith("| `") or line.startswith("| (")]
    assert rows
    for row in rows:
        source = row.rstrip(" |").rsplit("|", 1)[1]
        assert "`" in source or "absent" in source, row
