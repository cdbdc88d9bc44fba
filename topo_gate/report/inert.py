"""Text read from a file, made inert for each format a report writes: one function per format.

Profiles, evidence and captures are inputs like any other: a group class, a reason, a GPU model or a
note may carry what a reader's software would act on. Every such value reaches an output through
exactly one of these functions (the terminal's is ``topo_gate._terminal.shown``):

- ``markdown_text``: GitHub-flavoured Markdown (``summary.md``). A code span: the one construct in
  which neither CommonMark (links, images, emphasis, raw HTML, entities) nor GitHub's own passes
  over the rendered text (@-mentions, #issue references, emoji codes, bare URLs) act; ``cell``: the
  same in a table cell; ``markdown_prose``: a sentence of our own words quoting a file (a reason, a
  note, a label), readable as prose, each word GitHub would act on a code span of its own.
- ``html_text``: HTML (``report.html``): entities for ``& < > " '``.
- ``figure_text``: matplotlib (the PNGs): ``$`` escaped, so no text is parsed as mathtext (which
  would render ``$x^2$`` as a formula, and fail on ``$\\foo$``).

Each first makes control characters visible (``shown``): ESC, bidi overrides and line breaks are
never part of the output.
"""

from __future__ import annotations

import re
from html import escape

from topo_gate._terminal import shown

_BACKTICKS = re.compile(r"`+")


def markdown_text(value: object) -> str:
    """``value`` as one inert Markdown code span (empty text: nothing). In a table cell, escape its
    ``|`` (``cell``): GFM splits cells before it reads code spans."""
    text = shown(" ".join(str(value).split()))
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    # A span's content starting or ending with a backtick needs a space between it and the fence
    # (CommonMark strips one space from each side of a content padded on both).
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cell(text: object) -> str:
    """Text from a file in a Markdown table cell: ``markdown_text`` with its ``|`` escaped for GFM."""
    return markdown_text(text).replace("|", "\\|")


def html_text(value: object) -> str:
    """``value`` as HTML text or attribute content."""
    return escape(shown(value), quote=True)


def figure_text(value: object) -> str:
    """``value`` as matplotlib text shown literally (no mathtext)."""
    return shown(value).replace("$", r"\$")


# Markdown's own specials outside a code span, escaped with a backslash.
_MARKDOWN_SPECIALS = str.maketrans({c: f"\\{c}" for c in "\\`*_[]<>#!|~&"})
# A word GitHub acts on after Markdown (a backslash escape does not stop it): an @-mention or e-mail
# address, a #reference, an emoji code (``:shipit:``), a bare URL (``https://``, ``www.``).
_ACTIVE_WORD = re.compile(r"[@#]|:[A-Za-z0-9_+-]+:|://|\bwww\.", re.IGNORECASE)


def markdown_prose(value: object) -> str:
    """``value`` as Markdown prose: Markdown's specials escaped, and every word GitHub would still act
    on (``@everyone``, ``#1``, ``:shipit:``, ``https://...``) an inert code span (``markdown_text``)."""
    words = shown(str(value)).split(" ")
    return " ".join(
        markdown_text(word) if _ACTIVE_WORD.search(word) else word.translate(_MARKDOWN_SPECIALS)
        for word in words
    )
