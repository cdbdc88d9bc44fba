""" "What your launchers will do": one renderer of ``launchers.outlook`` for every surface that shows
a profile's result (``show`` and the probe's summary in the terminal, ``summary.md``, ``report.html``).

The outlook is laid out once, as blocks of segments (plain words, or a name or knob to set in code),
and each style only marks them up: so the terminal, the Markdown and the HTML cannot drift apart.
Every segment goes through one of ``inert``'s functions (a fallback's reason can quote a file).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from topo_gate._terminal import shown
from topo_gate.launchers.outlook import Outlook, Outlooks
from topo_gate.report.inert import html_text, markdown_prose, markdown_text

STYLES = ("text", "markdown", "html")
TITLE = "What your launchers will do"


@dataclass(frozen=True)
class Segment:
    """Words of the outlook: plain, a name or knob (``code``), or the launcher's release (``strong``)."""

    text: str
    code: bool = False
    strong: bool = False


TITLE_KIND, HEADING, PARAGRAPH, LAUNCHER, DETAIL = "title", "heading", "paragraph", "launcher", "detail"


@dataclass(frozen=True)
class Block:
    """One line of the outlook: a heading, a paragraph, a launcher's plan, or a detail under it."""

    kind: str
    segments: tuple[Segment, ...]


def render(found: Outlooks, style: str, *, width: int = 100, label: str = "") -> str:
    """The outlook in ``style`` (``STYLES``); ``width``: the terminal's, for ``text``; ``label``: the
    profile's, where a report shows several."""
    blocks = layout(found, label)
    if style == "text":
        return "\n".join(_text(block, width) for block in blocks)
    if style == "markdown":
        return "\n".join(_markdown(block) for block in blocks)
    if style == "html":
        return _html(blocks)
    raise ValueError(f"style must be one of {', '.join(STYLES)}, not {style!r}")


def terminal(found: Outlooks, width: int) -> Text:
    """The ``text`` style for a rich console: the title and headings bold."""
    out = Text()
    for i, block in enumerate(layout(found)):
        line = _text(block, width)
        out.append(("\n" if i else "") + line, style="bold" if block.kind in (TITLE_KIND, HEADING) else "")
    return out


def layout(found: Outlooks, label: str = "") -> list[Block]:
    """The blocks: the title and what the comparison is, then per TP size and served model a
    heading and each launcher's plan with its details."""
    blocks = [
        Block(TITLE_KIND, (Segment(f"{TITLE}: {label}" if label else TITLE),)),
        Block(
            PARAGRAPH,
            (
                Segment("Each launcher's pinned release as "),
                Segment("topo-gate recommend", code=True),
                Segment(
                    " plans it on a node like this one: its default path per size range, the plan "
                    "against that default, and what would give a plan where nothing changes. The "
                    "decision tables compare backends with NCCL, not with a launcher's default."
                ),
            ),
        ),
    ]
    blocks += [Block(PARAGRAPH, (Segment(note),)) for note in found.notes]
    heading = None
    for entry in found.entries:
        if (entry.tp, entry.shape) != heading:
            heading = (entry.tp, entry.shape)
            words = f"TP {entry.tp}, {entry.shape.words}, workload '{entry.workload}'"
            blocks.append(Block(HEADING, (Segment(words),)))
        blocks += _launcher(entry)
    return blocks


def _launcher(entry: Outlook) -> list[Block]:
    outcome = entry.outcome
    plan = (
        (Segment("fallback, nothing changed: "), Segment(outcome.fallback, code=True))
        if outcome.fallback is not None
        else (Segment(outcome.knobs, code=True), Segment(f": {outcome.estimate}"))
        if outcome.knobs
        else (Segment(outcome.estimate),)
    )
    blocks = [Block(LAUNCHER, (Segment(entry.release, strong=True), Segment(": "), *plan))]
    patterns = list(dict.fromkeys(span.pattern for span in entry.defaults))
    for pattern in patterns:
        spans = [span for span in entry.defaults if span.pattern == pattern]
        segments: list[Segment] = [Segment(f"default, {pattern}: ")]
        for i, span in enumerate(spans):
            segments += [Segment("; " if i else ""), Segment(span.path, code=True)]
            segments.append(Segment(span.words.removeprefix(span.path)))
        blocks.append(Block(DETAIL, tuple(s for s in segments if s.text)))
    for cause in entry.causes:
        words = f"not measured: {cause.words}. To get a plan: {cause.action}."
        blocks.append(Block(DETAIL, (Segment(words),)))
    if entry.with_setting is not None:
        blocks.append(
            Block(
                DETAIL,
                (
                    Segment("with "),
                    Segment(entry.setting, code=True),
                    Segment(f": {entry.with_setting.words}"),
                ),
            )
        )
    if entry.unlock:
        blocks.append(Block(DETAIL, (Segment(entry.unlock),)))
    return blocks


def _text(block: Block, width: int) -> str:
    words = "".join(shown(segment.text) for segment in block.segments)
    first, rest = {
        TITLE_KIND: ("", ""),
        HEADING: ("", ""),
        PARAGRAPH: ("", ""),
        LAUNCHER: ("- ", "    "),
        DETAIL: ("    ", "      "),
    }[block.kind]
    return ("\n" if block.kind == HEADING else "") + textwrap.fill(
        words,
        width=max(width, 40),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def _markdown(block: Block) -> str:
    words = "".join(
        markdown_text(s.text)
        if s.code
        else f"**{markdown_prose(s.text)}**"
        if s.strong
        else markdown_prose(s.text)
        for s in block.segments
    )
    if block.kind in (TITLE_KIND, HEADING):
        return f"\n{'##' if block.kind == TITLE_KIND else '###'} {words}\n"
    return {PARAGRAPH: f"{words}\n", LAUNCHER: f"- {words}", DETAIL: f"  - {words}"}[block.kind]


def _html(blocks: Sequence[Block]) -> str:
    """Headings, paragraphs, and per heading one list of launchers, each with its list of details."""
    out = []
    open_list = open_details = False
    for block in blocks:
        words = "".join(
            f"<code>{html_text(s.text)}</code>"
            if s.code
            else f"<strong>{html_text(s.text)}</strong>"
            if s.strong
            else html_text(s.text)
            for s in block.segments
        )
        if block.kind == TITLE_KIND:
            out.append(f'<h2 class="outlook">{words}</h2>')
            continue
        if block.kind != DETAIL and open_details:
            out.append("</ul></li>")
            open_details = False
        if block.kind in (HEADING, PARAGRAPH) and open_list:
            out.append("</ul>")
            open_list = False
        if block.kind == HEADING:
            out.append(f"<h3>{words}</h3>")
        elif block.kind == PARAGRAPH:
            out.append(f"<p>{words}</p>")
        elif block.kind == LAUNCHER:
            if not open_list:
                out.append('<ul class="outlook">')
                open_list = True
            out.append(f"<li>{words}")
            out.append("<ul>")
            open_details = True
        else:
            out.append(f"<li>{words}</li>")
    if open_details:
        out.append("</ul></li>")
    if open_list:
        out.append("</ul>")
    return "\n".join(out)
