"""Text read from a file, made safe to show on a terminal.

Profiles, captures and evidence are inputs like any other: a ``reason``, a GPU name or a capture note
may hold ESC sequences (which move the cursor, retitle the window or hide text) or rich markup (which
would restyle or hide the rest of the line). ``shown`` is the one place such text is escaped before
it reaches a terminal. Standard library only: the launcher wrappers use it too.
"""

from __future__ import annotations

import re

# C0 controls (ESC, CR, BS, newline, ...), DEL, C1 controls (including the 8-bit CSI), and the
# invisible characters that reorder or split what is shown: line/paragraph separators, bidi controls.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# rich's own tag syntax (rich.markup.escape): a ``[`` opening a tag, with the backslashes before it.
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def shown(value: object, *, markup: bool) -> str:
    """``value`` as text with every control character written as a visible escape (``\\x1b``).

    ``markup=True`` also escapes rich markup, for text that rich will parse as markup (a ``str`` given
    to ``Table.add_row`` or ``Console.print``); ``False`` for plain output and for ``rich.text.Text``,
    which never parses markup.
    """
    text = _CONTROL.sub(_visible, str(value))
    if not markup:
        return text
    text = _MARKUP_TAG.sub(lambda match: f"{match.group(1)}{match.group(1)}\\{match.group(2)}", text)
    # A trailing lone backslash would escape whatever markup follows this text.
    if text.endswith("\\") and not text.endswith("\\\\"):
        text += "\\"
    return text


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
