"""SGLang 0.5.23's own files, for the tests that compare ``custom_v2`` with the release it reproduces.

Read from, in order: the bundle ``TOPO_GATE_SGLANG_BUNDLE`` names (``scripts/sglang_v2_bundle.py
build``: ``site/`` and ``reference/``), the wheel ``sglang-0.5.23-*.whl`` in the folder
``TOPO_GATE_LAUNCHER_SOURCES`` names (the convention of ``tests/launchers/test_manifests_current.py``),
or an installed sglang 0.5.23. Tests needing them skip when none is there (they are not in the
repository: the wheel is 39 MB).
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import textwrap
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest

RELEASE = "0.5.23"
CONFIG = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
V2 = "sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py"
KERNELS = "sglang/kernels/ops/communication/all_reduce.py"
SKIP_REASON = (
    f"SGLang {RELEASE}'s sources not found: set TOPO_GATE_SGLANG_BUNDLE (scripts/sglang_v2_bundle.py "
    "build) or TOPO_GATE_LAUNCHER_SOURCES (a folder holding the wheel)"
)


def read(relpath: str) -> str | None:
    bundle = os.environ.get("TOPO_GATE_SGLANG_BUNDLE")
    if bundle:
        for base in ("site", "reference"):
            path = Path(bundle) / base / relpath
            if path.is_file():
                return path.read_text(encoding="utf-8")
    sources = os.environ.get("TOPO_GATE_LAUNCHER_SOURCES")
    if sources:
        for wheel in sorted(Path(sources).glob(f"sglang-{RELEASE}-*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                if relpath in archive.namelist():
                    return archive.read(relpath).decode("utf-8")
    try:
        dist = importlib.metadata.distribution("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None
    located = Path(str(dist.locate_file(relpath)))
    return located.read_text(encoding="utf-8") if dist.version == RELEASE and located.is_file() else None


def require(relpath: str) -> str:
    source = read(relpath)
    if source is None:
        pytest.skip(SKIP_REASON)
    return source


def config_module() -> types.ModuleType:
    """SGLang's v2 tuning-table module, executed from its own source (it imports torch only)."""
    module = types.ModuleType("sglang_custom_all_reduce_v2_config")
    exec(compile(require(CONFIG), CONFIG, "exec"), module.__dict__)
    return module


def _definitions(source: str, names: set[str]) -> str:
    tree = ast.parse(source)
    picked = []
    for node in tree.body:
        targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if getattr(node, "name", None) in names or set(targets) & names:
            segment = ast.get_source_segment(source, node)
            assert segment is not None
            picked.append(segment)
    assert len(picked) == len(names), f"expected {sorted(names)}"
    return "\n\n".join(picked)


def sglang_pick_config() -> Any:
    """``CustomAllReduceV2._pick_config`` as SGLang wrote it, with SGLang's own ``AllReduceConfig``
    (custom_all_reduce_v2.py) and ``AllReduceAlgo`` (the kernels' bindings), cut from their sources."""
    v2, kernels = require(V2), require(KERNELS)
    namespace: dict[str, Any] = {}
    exec("import enum\nfrom typing import NamedTuple, Optional\n", namespace)
    exec(_definitions(kernels, {"AllReduceAlgo", "_ALGO_NAMES"}), namespace)
    exec(_definitions(v2, {"AllReduceConfig"}), namespace)
    (cls,) = [n for n in ast.parse(v2).body if isinstance(n, ast.ClassDef) and n.name == "CustomAllReduceV2"]
    (method,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_pick_config"]
    segment = ast.get_source_segment(v2, method, padded=True)
    assert segment is not None
    exec(textwrap.dedent(segment), namespace)
    return namespace["_pick_config"]
