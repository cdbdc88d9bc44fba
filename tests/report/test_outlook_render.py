"""One renderer of "What your launchers will do" for the terminal, summary.md and report.html: the same
blocks in each, text from files inert, the terminal's lines within its width; and each surface that
shows a profile's result carries it (show's and the report's, for the bundled profile, are golden
screens under tests/golden; here the probe's summary and show's JSON)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from topo_gate.cli import main
from topo_gate.launchers.knobs import PINNED
from topo_gate.launchers.outlook import Cause, Outcome, Outlook, Outlooks, Shape, outlooks
from topo_gate.profile.io import load_profile
from topo_gate.report.outlook import TITLE, layout, render
from topo_gate.report.summary import summary

REPO = Path(__file__).resolve().parents[2]
H200_PATH = REPO / "profiles/h200-x2/h7168-run1.yaml"
H200 = load_profile(H200_PATH)
HOSTILE = "x`|*_<script>\x1b[2J"


@pytest.fixture(scope="module")
def found() -> Outlooks:
    """The bundled profile's outlook for a served model: six plans, 0.7 s of CPU, built when a
    test here first needs it rather than at import, where every collection (each xdist worker, every
    run of an unrelated test) paid for it."""
    return outlooks(H200, model="llama-3-70b")


def _hostile() -> Outlooks:
    entry = Outlook("vllm", 2, Shape("hidden 64", 64), "serving", Outcome("", "", f"unusable {HOSTILE}"))
    cause = Cause("vLLM runs p here by default", (1, 2), "why", "act")
    return Outlooks(
        (entry, Outlook("sglang", 2, Shape("hidden 64", 64), "serving", Outcome("", "e"), causes=(cause,)))
    )


@pytest.mark.parametrize("width", [80, 200])
def test_the_terminal_text_keeps_within_its_width_and_says_every_launcher(
    width: int, found: Outlooks
) -> None:
    text = render(found, "text", width=width)
    assert text.startswith(TITLE)
    assert all(len(line) <= width for line in text.splitlines())
    for release in ("SGLang 0.5.23:", f"vLLM {PINNED['vllm']}:", "TensorRT-LLM git-f6a156b:"):
        assert f"- {release}" in text
    assert "with VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm: " in text


def test_markdown_and_html_carry_the_same_lines_as_the_terminal(found: Outlooks) -> None:
    blocks = layout(found)
    markdown = render(found, "markdown")
    html = render(found, "html")
    assert markdown.count("\n- ") == html.count("<li>") - sum(b.kind == "detail" for b in blocks)
    assert markdown.count("  - ") == sum(b.kind == "detail" for b in blocks)
    assert "`VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm`" in markdown
    assert "<code>VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm</code>" in html


class _Balance(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.open.append(tag)

    def handle_endtag(self, tag) -> None:
        assert self.open and self.open.pop() == tag, tag


def test_the_html_nests_each_launchers_details_in_its_list_item(found: Outlooks) -> None:
    checker = _Balance()
    checker.feed(render(found, "html"))
    assert checker.open == []


def test_text_from_a_file_is_inert_in_every_style() -> None:
    found = _hostile()
    assert "\x1b" not in render(found, "text")
    html = render(found, "html")
    assert "<script>" not in html and "&lt;script&gt;" in html
    markdown = render(found, "markdown")
    assert "\x1b" not in markdown
    # The reason sits in a code span; the plain words have Markdown's specials escaped.
    assert re.search(r"``x`\|\*_<script>\\x1b\[2J``|`+[^`]*x`", markdown)


@pytest.mark.slow  # a whole show of the bundled profile
def test_show_puts_it_in_the_json(capsys) -> None:
    assert main(["show", str(H200_PATH), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [e["launcher"] for e in data["launchers"]["entries"]] == ["sglang", "vllm", "trtllm"]


def test_the_probe_summary_ends_with_it(found: Outlooks) -> None:
    console = Console(width=80, record=True)
    console.print(summary(H200, profile_path="p.yaml", evidence_path=None, outlook=found))
    text = console.export_text()
    assert text.index("profile:  p.yaml") < text.index(TITLE)
    assert all(len(line) <= 80 for line in text.splitlines())
