"""Byte sizes in words: the one formatter every message, note, report and table uses.

Standard library only and importing nothing of the package, so every layer may use it.
"""

from __future__ import annotations


def human_bytes(nbytes: int, *, digits: int = 4) -> str:
    """``14336`` -> ``14 KiB``, ``1572864`` -> ``1.5 MiB``, ``100`` -> ``100 B``: the largest binary
    unit the size reaches (binary, as the sizes are), to ``digits`` significant digits.

    Four serve a decision's reasons and the reports. A launcher's limit takes six: its ``63.998 MiB``
    (one token under 64 MiB) must not read as the ``64 MiB`` beside it.
    """
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, step = float(nbytes), 0
    while value >= 1024 and step < len(units) - 1:
        value /= 1024
        step += 1
    return f"{value:.{digits}g} {units[step]}"
