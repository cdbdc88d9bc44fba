"""Caps on the work an evidence file asks of ``decide`` and ``report``, not only on its bytes.

The byte cap (256 MiB) keeps a file from filling memory, but what takes time is the paired bootstrap:
every sample of every cell is resampled ``--bootstrap`` times (2000) per size, in Python. One cell
of 200,000 samples -- a 10 MB file -- kept ``decide`` busy for minutes. These caps bound each factor
of that work, far above what a probe writes (15 rounds per cell by default, 224 cells per run on
2x H200, 21 sizes):

- ``MAX_SERIES``: samples in any one series (a cell's rounds, a rank's rounds, a transition's
  replays), 1000: at the default 15 rounds and 2000 resamples the CI has long stopped moving;
- ``MAX_ENTRIES``: items in any other list (cells of a run, runs, GPU pairs of a capture), 8192:
  a 72-GPU node has 5112 ordered pairs;
- ``MAX_SIZES``: distinct message sizes in one run, 64 (a token ladder up to 2^20 has 21);
- ``MAX_SAMPLES``: samples in the whole file, 2,000,000 (a TP 2/4/8 probe at 15 rounds: ~20,000).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_SERIES = 1000
MAX_ENTRIES = 8192
MAX_SIZES = 64
MAX_SAMPLES = 2_000_000


def work_problem(evidence: Mapping[str, Any]) -> str | None:
    """The first cap ``evidence`` (already checked for shape) exceeds, named by field; or None."""
    total = 0
    stack: list[tuple[Any, str]] = [(evidence, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, Mapping):
            stack.extend((item, f"{where}.{key}" if where else str(key)) for key, item in value.items())
            continue
        if not isinstance(value, list):
            continue
        numbers = bool(value) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
        if numbers:
            total += len(value)
            if len(value) > MAX_SERIES:
                return f"{where}: {len(value)} samples in one series; at most {MAX_SERIES} are read"
        elif len(value) > MAX_ENTRIES:
            return f"{where}: {len(value)} entries; at most {MAX_ENTRIES} are read"
        else:
            stack.extend((item, f"{where}[{index}]") for index, item in enumerate(value))
    if total > MAX_SAMPLES:
        return f"runs: {total} samples in all; at most {MAX_SAMPLES} are read"
    for index, run in enumerate(evidence.get("runs") or ()):
        sizes = {cell.get("nbytes") for cell in run.get("results") or () if isinstance(cell, Mapping)}
        if len(sizes) > MAX_SIZES:
            return f"runs[{index}].results: {len(sizes)} message sizes; at most {MAX_SIZES} are read"
    return None
