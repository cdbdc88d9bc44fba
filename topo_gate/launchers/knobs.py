"""The pinned launcher releases and their knob manifests (``data/knobs-<launcher>-<version>.json``).

The manifests are extracted from each release's own source by ``scripts/extract_knobs.py``: flag names
and choices, env var names, config keys, and the launcher's built-in size tables. Planners read the
tables from here rather than copying numbers, and the tests check every emitted knob against them.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

#: The releases topo-gate has a route model and a knob manifest for, oldest first (``releases`` says
#: which installed release plans with which). TensorRT-LLM is pinned to a source commit: its wheel is
#: several GB, so its manifest was extracted from the source files at that commit instead.
SUPPORTED: dict[str, tuple[str, ...]] = {
    "sglang": ("0.5.23",),
    "vllm": ("0.33.0", "0.34.0"),
    "trtllm": ("git-f6a156b",),
}
#: Libraries the launchers call whose tables the route models read (FlashInfer's one-/two-shot
#: heuristic), with their modelled releases, oldest first.
LIBRARY_RELEASES: dict[str, tuple[str, ...]] = {"flashinfer": ("0.7.2.post1", "0.7.4")}
#: The newest modelled release of each launcher: what a plan models when the release the user runs
#: is not known (``recommend`` without ``--launcher-version``).
PINNED: dict[str, str] = {launcher: releases[-1] for launcher, releases in SUPPORTED.items()}
LAUNCHERS: tuple[str, ...] = tuple(SUPPORTED)
LIBRARIES: dict[str, str] = {library: releases[-1] for library, releases in LIBRARY_RELEASES.items()}
MiB = 1 << 20
#: Where the manifests are installed: package data beside this module (``pyproject.toml``), read as
#: files (``importlib.resources`` would cost a launcher's start its zipfile and tempfile imports).
DATA = Path(__file__).resolve().parent / "data"


def releases_of(name: str) -> tuple[str, ...]:
    """The modelled releases of a launcher or library, oldest first (KeyError: not one of them)."""
    return SUPPORTED[name] if name in SUPPORTED else LIBRARY_RELEASES[name]


@cache
def manifest(launcher: str, release: str | None = None) -> dict[str, Any]:
    """The knob manifest of ``release`` of ``launcher`` (or of a library in LIBRARY_RELEASES); None:
    the newest modelled. ``KeyError`` for a release with no manifest."""
    release = release or releases_of(launcher)[-1]
    if release not in releases_of(launcher):
        raise KeyError(f"{launcher} {release} is not a modelled release ({', '.join(releases_of(launcher))})")
    name = f"knobs-{launcher}-{release}.json"
    text = (DATA / name).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def table(launcher: str, name: str, release: str | None = None) -> Any:
    """One of the launcher's built-in tables in ``release`` (None: the newest), as extracted (dict
    keys are strings)."""
    return manifest(launcher, release)["tables"][name]


def per_capability(
    launcher: str,
    name: str,
    tp: int,
    capability: tuple[int, int] | None,
    key: str,
    scale: float = 1,
    release: str | None = None,
) -> list[int | None]:
    """A per-(capability, TP) size limit in bytes: one value, or every table row's when the capability is
    unknown (the caller must then be safe for all of them). None: no entry, the launcher's path is off.

    ``key`` says how the table spells capabilities: ``"int"`` (90), ``"dotted"`` ("9.0"), ``"major"`` ("9").
    """
    rows: dict[str, dict[str, float]] = table(launcher, name, release)
    if capability is not None:
        major, minor = capability
        spelled = {"int": f"{major}{minor}", "dotted": f"{major}.{minor}", "major": f"{major}"}[key]
        selected = [rows.get(spelled, {})]
    else:
        selected = list(rows.values())
    return [None if str(tp) not in row else int(row[str(tp)] * scale) for row in selected]
