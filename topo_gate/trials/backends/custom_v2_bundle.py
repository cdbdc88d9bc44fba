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
import subprocess
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
    """What ``activate`` and the backend's imports would answer in a fresh worker, asked without
    changing this process: no import, no ``sys.path`` entry here (the probe asks before any trial,
    ``probe/installed.py``). The modules are looked for as files first, because finding a submodule
    imports its parents, and an installed ``sglang/__init__.py`` imports the whole server; then they
    are imported in a fresh interpreter, as the worker imports them."""
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
    return _import_problem(environ)


#: How long importing the kernels' modules may take in the fresh interpreter (tvm-ffi and torch load
#: in a few seconds; a hung import is a problem to report, not to wait on).
IMPORT_TIMEOUT_S = 120
_IMPORT_ALL = """
import importlib, sys
from topo_gate.trials.backends.custom_v2_bundle import DEPENDENCIES, MODULES, activate
reason = activate()
if reason is not None:
    sys.exit(reason)
for name in (*DEPENDENCIES, *MODULES):
    try:
        importlib.import_module(name)
    except Exception as error:
        sys.exit(f"importing {name} fails in {sys.executable}: {type(error).__name__}: {error}")
"""


def _import_problem(environ: Mapping[str, str]) -> str | None:
    """Import what the backend imports, as a worker does (``activate``, then each module), in a fresh
    interpreter of this Python: files that are there can still fail to load (a compiled wheel of
    another CPython), and this process must not import SGLang."""
    root = str(Path(__file__).resolve().parents[3])  # the folder holding topo_gate
    paths = [root, *([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else [])]
    env = {**environ, "PYTHONPATH": os.pathsep.join(paths)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _IMPORT_ALL],
            env=env,
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"importing SGLang's v2 modules took over {IMPORT_TIMEOUT_S} s"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"importing SGLang's v2 modules failed (exit {done.returncode})"


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
    running = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = manifest.get("abi") or {}
    foreign = {name: tag for name, tag in abi.items() if str(tag).startswith("cp") and tag != running}
    if foreign:
        name, tag = next(iter(foreign.items()))
        return (
            f"{ENV}={folder} holds {name} built for {tag}, this interpreter is {running}: rebuild the bundle "
            "with this Python (python scripts/sglang_v2_bundle.py build)"
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
