"""Text read from a file, made safe to show on a terminal.

Profiles, captures and evidence are inputs like any other: a ``reason``, a GPU name or a capture note
may hold ESC sequences (which move the cursor, retitle the window or hide text), rich markup such as
``[red]`` or emoji codes such as ``:ab:`` (which would restyle, hide or replace what follows).
``shown`` is the one place such text is escaped before it reaches a terminal; rich output then
carries it as ``rich.text.Text`` (``report.text.file_text``), which never interprets markup or emoji
codes. Standard library only: the launcher wrappers use it too.
"""

from __future__ import annotations

import re

# C0 controls (ESC, CR, BS, newline, ...), DEL, C1 controls (including the 8-bit CSI), and the
# invisible characters that reorder or split what is shown: line/paragraph separators, bidi controls.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


#: The most characters of one value shown: no reason, name or path a person reads is longer (a path
#: is at most 4096 bytes, PATH_MAX), and past it a value only fills screens -- and costs the terminal
#: renderer (rich re-splits a wrapped text once per line) time growing with the square of its length:
#: a 12 MB skipped reason took ``show`` minutes. The rest is counted, not shown (``--json`` has it all).
MAX_SHOWN_CHARACTERS = 4096


def shown(value: object) -> str:
    """``value`` as one line of text with every control character written as a visible escape
    (``\\x1b``, ``\\n``-as-``\\x0a``, ``\\u202e``); past ``MAX_SHOWN_CHARACTERS``, cut and the rest counted."""
    text = str(value)
    cut = len(text) - MAX_SHOWN_CHARACTERS
    if cut > 0:
        return f"{_CONTROL.sub(_visible, text[:MAX_SHOWN_CHARACTERS])}... ({cut} more characters not shown)"
    return _CONTROL.sub(_visible, text)


def shown_lines(text: str) -> str:
    """A text of several lines (a table), each line through ``shown``: its newlines kept, every other
    control character escaped."""
    return "\n".join(shown(line) for line in text.split("\n"))


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
