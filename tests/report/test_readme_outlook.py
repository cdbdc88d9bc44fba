"""The README's H200 section shows what `topo-gate show` prints for the bundled 2x H200 profile under
"What your launchers will do", at 100 columns: the block between its markers is that text, today's."""

from __future__ import annotations

import sys
from pathlib import Path

from topo_gate.launchers.outlook import outlooks
from topo_gate.profile.io import load_profile
from topo_gate.report.outlook import render

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BEGIN, END = "<!-- outlook:begin", "<!-- outlook:end -->"
WIDTH = 100


def current() -> str:
    return render(outlooks(load_profile(ROOT / "profiles/h200-x2/h7168-run1.yaml")), "text", width=WIDTH)


def rewrite(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    marker, _ = rest.split("```text\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}{marker}```text\n{current()}\n```\n{END}{tail}"


def test_the_readme_shows_todays_outlook_of_the_bundled_h200_profile() -> None:
    text = README.read_text(encoding="utf-8")
    assert rewrite(text) == text, "regenerate: python tests/report/test_readme_outlook.py"


if __name__ == "__main__":
    README.write_text(rewrite(README.read_text(encoding="utf-8")), encoding="utf-8")
    sys.exit(0)
