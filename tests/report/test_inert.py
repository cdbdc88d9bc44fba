"""Text from files is inert in every format a report writes: summary.md, report.html, the figures and
the terminal.

tests/fixtures/hostile/evidence-markup.json is valid evidence whose group classes, skip reason,
software version and one backend name carry an image, a link, raw HTML, an @-mention, an issue
reference, emphasis, a table pipe, a code span, mathtext, an entity, a bare URL, an emoji code, ESC
and a right-to-left override.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from topo_gate.cli import main
from topo_gate.report.inert import cell, figure_text, html_text, markdown_text

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HOSTILE = REPO / "tests" / "fixtures" / "hostile" / "evidence-markup.json"
#: What a renderer or GitHub would act on, if any of it were live.
LIVE = ("evil.example", "@octocat", "#1", ":+1:", "alert(1)", "**bold**", "$\\alpha^2$")


def rendered(markdown: str) -> str:
    """GFM-like HTML of ``markdown`` (CommonMark with tables, as GitHub parses before its filters)."""
    return MarkdownIt("commonmark").enable("table").render(markdown)


def outside_code(html: str) -> str:
    """What GitHub's text filters (mentions, issue links, emoji, autolinks) would see: code removed."""
    return re.sub(r"<code>.*?</code>", "", html, flags=re.S)


def test_summary_md_is_inert(tmp_path: Path, capsys) -> None:
    assert main(["report", str(HOSTILE), "--out", str(tmp_path), "--format", "md"]) == 0
    _, err = capsys.readouterr()
    assert "\x1b" not in err and "\u202e" not in err  # the terminal notes are escaped too
    markdown = (tmp_path / "summary.md").read_text()
    assert "\x1b" not in markdown and "\u202e" not in markdown
    html = rendered(markdown)
    assert "<img" not in html and "<a " not in html and "<script" not in html and "<strong>" not in html
    rest = outside_code(html)
    for live in LIVE:
        assert live in html  # shown ...
        assert live not in rest  # ... only as code
    # The table kept its shape: every decision row has the header's cell count.
    rows = [line for line in markdown.splitlines() if line.startswith("| 2 |") or line.startswith("| 4 |")]
    assert rows and all(len(re.findall(r"(?<!\\)\|", row)) == 8 for row in rows)


@pytest.mark.parametrize(
    "text",
    ["plain", "`tick`", "a``b", "``", "ends with `", "|pipe|", "line\nbreak  and   spaces", "\x1b[2J"],
)
def test_markdown_text_is_one_code_span_holding_the_text(text: str) -> None:
    span = markdown_text(text)
    html = rendered(span).strip()
    expected = " ".join(text.split()).replace("\x1b", "\\x1b")
    assert (
        html
        == f"<p><code>{expected.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')}</code></p>"
    )
    cell_html = rendered(f"| a |\n| --- |\n| {cell(text)} |\n")
    assert f"<code>{expected}</code>" in cell_html


def test_html_is_escaped(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert main(["report", str(HOSTILE), "--out", str(tmp_path), "--format", "html"]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "<img src=x" not in page and "<script>" not in page and "\x1b" not in page and "\u202e" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_html_text_escapes_markup_and_controls() -> None:
    assert html_text('<b a="1">&\x1b\u202e') == "&lt;b a=&quot;1&quot;&gt;&amp;\\x1b\\u202e"


def test_mathtext_in_a_group_class_is_drawn_literally() -> None:
    pytest.importorskip("matplotlib")
    from dataclasses import replace

    from topo_gate.probe import DecideSettings
    from topo_gate.report.figures import figure_specs
    from topo_gate.report.render import render_png
    from topo_gate.report.sources import load_sources

    (spec, *_), _ = figure_specs(load_sources([HOSTILE], DecideSettings(bootstrap=100)))
    # Parsed as mathtext, "$\\foo$" is an unknown symbol: matplotlib raises while drawing.
    for title in ("$\\foo$ unknown symbol", "$x^2$ and $", "\\$ escaped $"):
        assert render_png(replace(spec, title=title)).startswith(b"\x89PNG")


def test_figure_text_escapes_every_dollar() -> None:
    assert figure_text("$\\foo$ \x1b") == "\\$\\foo\\$ \\x1b"
