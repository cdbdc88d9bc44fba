"""Text from files in rich output: escaped by ``_terminal.shown`` and carried as ``rich.text.Text``.

A plain ``str`` given to rich is parsed for markup (``[red]``) and emoji codes (``:ab:``, which turns
the bus id ``00000000:AB:00.0`` into a picture); a ``Text`` is shown as it is.
"""

from __future__ import annotations

from rich.text import Text

from topo_gate._terminal import shown


def file_text(value: object, style: str = "") -> Text:
    """``value`` (read from a profile, capture or evidence file) as rich text shown literally."""
    return Text(shown(value), style=style)
