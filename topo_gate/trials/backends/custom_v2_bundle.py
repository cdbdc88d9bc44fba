"""Where the worker finds SGLang's custom all-reduce v2: an installed sglang, or the bundle.

- ``TOPO_GATE_SGLANG_BUNDLE`` set: the folder ``scripts/sglang_v2_bundle.py`` built (the pinned
  wheel's ``sglang/kernels/`` and the few files around it, see that script). Its ``site/`` goes to
  the front of ``sys.path``, so it wins over any installed sglang; its ``tvm_ffi/`` (SGLang's pin)
  only to the back: a process loads one tvm-ffi, and where another is importable already (FlashInfer's
  bundle or install) that one is used (``tvm_ffi_in_use`` says which the run got).
- unset: an installed ``sglang`` (``pip install sglang==0.5.23`` next to ``.[trials]``).

Either must be sglang 0.5.23, the release whose call sequence ``custom_v2`` reproduces. Nothing here
imports SGLang or tvm-ffi: admission stays cheap (the modules are imported in ``custom_v2``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

ENV = "TOPO_GATE_SGLANG_BUNDLE"
#: The release ``custom_v2.py`` and ``custom_v2_dispatch.py`` cite.
PINNED_SGLANG = "0.5.23"
BUNDLE_FORMAT = "topo-gate/sglang-v2-bundle/v1"
#: What the backend imports: the kernels' bindings, the env registry, v2's table, and their deps.
MODULES = (
    "sglang.kernels.ops.communication.all_reduce",
    "sglang.srt.environ",
    "sglang.srt.distributed.device_communicators.configs.custom_all_reduce_v2",
)
DEPENDENCIES = ("tvm_ffi", "msgspec")


def activate(environ: Mapping[str, str] = os.environ) -> str | None:
    """Make SGLang's v2 importable in this process; ``None``, or why it cannot be."""
    folder = environ.get(ENV)
    reason = _activate_bundle(Path(folder)) if folder else _installed_release()
    if reason is not None:
        return reason
    for name in DEPENDENCIES:
        if _spec(name) is None:
            return f"{name} not importable (SGLang's v2 kernels need it)"
    for name in MODULES:
        if _spec(name) is None:
            return f"{name} not importable"
    return None


def kernels_missing(environ: Mapping[str, str] = os.environ) -> str | None:
    """What ``activate`` would answer in a fresh worker, asked without changing this process: no
    import, no ``sys.path`` entry (the probe asks before any trial, ``probe/installed.py``). The
    modules are looked for as files, because finding a submodule imports its parents, and an
    installed ``sglang/__init__.py`` imports the whole server."""
    folder = environ.get(ENV)
    if folder:
        reason = _manifest_problem(Path(folder))
        roots = [Path(folder) / "site", Path(folder) / "tvm_ffi"]  # what activate puts on sys.path
    else:
        reason = _installed_release()
        spec = _spec("sglang")
        roots = [
            Path(location).parent for location in (getattr(spec, "submodule_search_locations", None) or ())
        ]
    if reason is not None:
        return reason
    for name in DEPENDENCIES:
        if _spec(name) is None and not any((root / name).is_dir() for root in roots):
            return f"{name} not importable (SGLang's v2 kernels need it)"
    for name in MODULES:
        relative = Path(*name.split("."))
        if not any((root / relative).with_suffix(".py").is_file() for root in roots):
            return f"{name} not importable"
    return None


def _manifest_problem(folder: Path) -> str | None:
    manifest_path = folder / "bundle.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"{ENV}={folder}: no readable bundle.json ({error}); build it with scripts/sglang_v2_bundle.py"
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        return f"{ENV}={folder}: bundle.json is not a {BUNDLE_FORMAT} manifest"
    if manifest.get("sglang") != PINNED_SGLANG:
        return (
            f"{ENV}={folder} holds sglang {manifest.get('sglang')}; this backend reproduces {PINNED_SGLANG}"
        )
    return None


def _activate_bundle(folder: Path) -> str | None:
    problem = _manifest_problem(folder)
    if problem is not None:
        return problem
    loaded = sys.modules.get("sglang")
    site = (folder / "site").resolve()
    if loaded is not None and not str(getattr(loaded, "__file__", "") or "").startswith(str(site)):
        return f"another sglang is already imported in this process ({getattr(loaded, '__file__', None)})"
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    tvm = str((folder / "tvm_ffi").resolve())
    if _spec("tvm_ffi") is None and tvm not in sys.path:
        sys.path.append(tvm)
    importlib.invalidate_caches()
    return None


def _installed_release() -> str | None:
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return f"sglang not installed (pip install sglang=={PINNED_SGLANG}, or set {ENV}: docs/backends.md)"
    if version != PINNED_SGLANG:
        return f"sglang {version} is installed; this backend reproduces {PINNED_SGLANG}'s call sequence"
    return None


def _spec(name: str) -> object | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent package that fails to import, or a broken install
        return None


def tvm_ffi_in_use() -> str | None:
    """The version of the tvm-ffi this process imported, ``None`` before it is imported."""
    module = sys.modules.get("tvm_ffi")
    return None if module is None else getattr(module, "__version__", "unknown")
