"""The pinned launcher releases and their knob manifests (``data/knobs-<launcher>-<version>.json``).

The manifests are extracted from each release's own source by ``scripts/extract_knobs.py``: flag names
and choices, env var names, config keys, and the launcher's built-in size tables. Planners read the
tables from here rather than copying numbers, and the tests check every emitted knob against them.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

# The releases whose knobs topo-gate emits. TensorRT-LLM is pinned to a source commit: its wheel is
# several GB, so its manifest was extracted from the source files at that commit instead.
PINNED: dict[str, str] = {"sglang": "0.5.23", "vllm": "0.33.0", "trtllm": "git-f6a156b"}
LAUNCHERS: tuple[str, ...] = tuple(PINNED)
#: Libraries the launchers call whose tables the route models read (FlashInfer's one-/two-shot heuristic).
LIBRARIES: dict[str, str] = {"flashinfer": "0.7.2.post1"}
MiB = 1 << 20


@cache
def manifest(launcher: str) -> dict[str, Any]:
    """The knob manifest of the pinned release of ``launcher`` (or of a library in LIBRARIES)."""
    name = f"knobs-{launcher}-{PINNED.get(launcher) or LIBRARIES[launcher]}.json"
    # One joinpath() per component: several arguments need Python 3.11's Traversable.
    text = resources.files("topo_gate.launchers").joinpath("data").joinpath(name).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def table(launcher: str, name: str) -> Any:
    """One of the launcher's built-in tables, as extracted (dict keys are strings)."""
    return manifest(launcher)["tables"][name]


def per_capability(
    launcher: str, name: str, tp: int, capability: tuple[int, int] | None, key: str, scale: float = 1
) -> list[int | None]:
    """A per-(capability, TP) size limit in bytes: one value, or every table row's when the capability is
    unknown (the caller must then be safe for all of them). None: no entry, the launcher's path is off.

    ``key`` says how the table spells capabilities: ``"int"`` (90), ``"dotted"`` ("9.0"), ``"major"`` ("9").
    """
    rows: dict[str, dict[str, float]] = table(launcher, name)
    if capability is not None:
        major, minor = capability
        spelled = {"int": f"{major}{minor}", "dotted": f"{major}.{minor}", "major": f"{major}"}[key]
        selected = [rows.get(spelled, {})]
    else:
        selected = list(rows.values())
    return [None if str(tp) not in row else int(row[str(tp)] * scale) for row in selected]
