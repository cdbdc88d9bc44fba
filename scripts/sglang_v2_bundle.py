#!/usr/bin/env python3
"""Build the bundle that lets a trial worker run SGLang's custom all-reduce v2 without installing SGLang.

SGLang 0.5.23 runs its JIT "custom all-reduce v2" by default on full-NVLink groups. The backend
``custom_v2_sglang`` times that kernel through SGLang's own code, which needs only a small part of the
SGLang wheel: ``sglang/kernels/`` (the JIT sources, their loader and the Python bindings), the env-var
registry ``sglang/srt/environ.py`` the loader reads, and v2's tuning table
``sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py``. GPU machines without
a package index (and without a spare half hour to install SGLang's dependencies) get exactly that::

    python scripts/sglang_v2_bundle.py build                 # downloads the pinned wheels (pip)
    python scripts/sglang_v2_bundle.py build --wheels DIR    # offline: the three wheels already in DIR
    export TOPO_GATE_SGLANG_BUNDLE=$PWD/build/sglang-v2      # the backend finds it here (docs/backends.md)
    # on a GPU node (torch there): build the JIT modules into SGLANG_JIT_CACHE_DIR, timed
    SGLANG_JIT_CACHE_DIR=$TOPO_GATE_SGLANG_BUNDLE/jit-cache python scripts/sglang_v2_bundle.py prebuild

Layout of the bundle (default ``build/sglang-v2``, ignored by git):

- ``site/``: the SGLang files above, unchanged, plus ``msgspec`` (the JIT cache's serialiser) and three
  stand-in modules (``STAND_INS``): the real ``sglang/__init__.py`` imports the whole server, and the
  real ``sglang/srt/utils/__init__.py`` / ``common.py`` import most of SGLang, while the kernels use
  two functions of ``common.py`` (``is_cuda``, ``get_cuda_version``), which the stand-in carries as
  their source text cut from the wheel's own file;
- ``tvm_ffi/``: ``apache-tvm-ffi`` at SGLang's pin (0.1.11), the binding layer. It is kept apart from
  ``site/`` because a process loads one tvm-ffi: where FlashInfer's (a newer one) is already importable
  the backend leaves this one unused (``custom_v2_bundle.activate``);
- ``reference/``: SGLang's ``custom_all_reduce_v2.py``, never imported (it imports the server): the
  file whose call sequence the backend reproduces, read by the tests that compare the two;
- ``bundle.json``: what went in, with the wheels' sha256, and why each stand-in exists.

``--python-version`` / ``--platform`` choose the wheels of tvm-ffi and msgspec (compiled code); the
defaults are this interpreter's CPython and manylinux x86_64, so run ``build`` with the Python that
will run the probe (a bundle built with 3.12's wheels does not import on 3.11). ``bundle.json``
records each compiled wheel's ABI tag, and the probe refuses a bundle of another CPython before any
trial (``custom_v2_bundle.kernels_missing``). The SGLang files are pure Python.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

SGLANG = "0.5.23"
#: SGLang 0.5.23's own pin (its METADATA: ``Requires-Dist: apache-tvm-ffi==0.1.11``).
TVM_FFI = "0.1.11"
#: SGLang 0.5.23 requires msgspec unpinned; the release this bundle was built and run with.
MSGSPEC = "0.23.0"
#: The CPython whose wheels ``build`` takes by default: the one running it.
RUNNING_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
FORMAT = "topo-gate/sglang-v2-bundle/v1"
REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "build" / "sglang-v2"

#: Taken from the SGLang wheel unchanged: a folder (trailing slash) or one file.
TAKEN = (
    "sglang/kernels/",
    "sglang/srt/environ.py",
    # environ.py imports it when SGLANG_CUDA_COREDUMP=1 (its last lines).
    "sglang/srt/debug_utils/__init__.py",
    "sglang/srt/debug_utils/cuda_coredump.py",
    "sglang/srt/distributed/device_communicators/configs/__init__.py",
    "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py",
)
#: Copied to reference/, never on the import path.
REFERENCE = ("sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py",)
#: The functions of ``sglang/srt/utils/common.py`` that ``sglang/kernels/jit/utils/arch.py`` imports.
COMMON_FUNCTIONS = ("is_cuda", "get_cuda_version")
_LABEL = (
    '"""STAND-IN written by topo-gate\'s scripts/sglang_v2_bundle.py, not SGLang\'s file.\n\n{why}\n"""\n'
)
STAND_INS = {
    "sglang/__init__.py": (
        "SGLang's own sglang/__init__.py imports the whole server (and its dependencies); the\n"
        "kernels need none of it, so this package initialiser is empty."
    ),
    "sglang/srt/utils/__init__.py": (
        "SGLang's own one star-imports sglang/srt/utils/common.py and network.py, which import most\n"
        "of SGLang; nothing the kernels import needs that."
    ),
    "sglang/srt/utils/common.py": (
        "The kernels (sglang/kernels/jit/utils/arch.py) import two functions of SGLang's\n"
        "sglang/srt/utils/common.py, whose other imports pull in most of SGLang. Below are those two\n"
        "functions' source, cut unchanged from the wheel's file (lines {lines})."
    ),
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(dest: Path, python_version: str, platforms: list[str]) -> None:
    """The three pinned wheels into ``dest`` through pip (needs a package index)."""
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    target = ["--python-version", python_version, "--implementation", "cp"]
    target += [flag for platform in platforms for flag in ("--platform", platform)]
    for requirement in (f"sglang=={SGLANG}", f"apache-tvm-ffi=={TVM_FFI}", f"msgspec=={MSGSPEC}"):
        subprocess.run([*base, *target, requirement], check=True)


def abi_tag(wheel: Path) -> str:
    """A wheel's ABI tag, from its file name (``name-version-python-abi-platform.whl``)."""
    return wheel.name.removesuffix(".whl").split("-")[-2]


def find_wheel(folder: Path, distribution: str, version: str) -> Path:
    found = sorted(folder.glob(f"{distribution}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"sglang_v2_bundle: no {distribution}-{version}-*.whl in {folder}")
    return found[-1]


def extract(archive: zipfile.ZipFile, members: list[str], dest: Path) -> None:
    for name in members:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(archive.read(name))


def taken_members(names: list[str]) -> list[str]:
    members = [n for n in names if any(n == t or (t.endswith("/") and n.startswith(t)) for t in TAKEN)]
    missing = [t for t in TAKEN if not any(n == t or n.startswith(t) for n in members)]
    if missing:
        raise SystemExit(f"sglang_v2_bundle: the SGLang wheel lacks {', '.join(missing)}")
    return [n for n in members if not n.endswith("/") and "__pycache__" not in n]


def common_stand_in(source: str) -> str:
    """``sglang/srt/utils/common.py`` cut down to COMMON_FUNCTIONS, their source unchanged."""
    tree = ast.parse(source)
    found = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name in COMMON_FUNCTIONS
    }
    missing = [name for name in COMMON_FUNCTIONS if name not in found]
    if missing:
        raise SystemExit(f"sglang_v2_bundle: sglang/srt/utils/common.py lacks {', '.join(missing)}")
    lines = source.splitlines()
    parts, spans = [], []
    for name in COMMON_FUNCTIONS:
        node = found[name]
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        parts.append("\n".join(lines[first - 1 : node.end_lineno]))
        spans.append(f"{first}-{node.end_lineno}")
    why = STAND_INS["sglang/srt/utils/common.py"].format(lines=", ".join(spans))
    header = _LABEL.format(why=why) + "\nfrom functools import lru_cache\n\nimport torch\n"
    return header + "\n\n" + "\n\n\n".join(parts) + "\n"


def build(wheels: Path, out: Path) -> dict:
    sglang_wheel = find_wheel(wheels, "sglang", SGLANG)
    tvm_wheel = find_wheel(wheels, "apache_tvm_ffi", TVM_FFI)
    msgspec_wheel = find_wheel(wheels, "msgspec", MSGSPEC)
    if out.exists():
        shutil.rmtree(out)
    site, tvm_dir, reference = out / "site", out / "tvm_ffi", out / "reference"
    with zipfile.ZipFile(sglang_wheel) as archive:
        names = archive.namelist()
        taken = taken_members(names)
        extract(archive, taken, site)
        extract(archive, list(REFERENCE), reference)
        common = archive.read("sglang/srt/utils/common.py").decode("utf-8")
    for name, why in STAND_INS.items():
        target = site / name
        target.parent.mkdir(parents=True, exist_ok=True)
        text = common_stand_in(common) if name.endswith("common.py") else _LABEL.format(why=why)
        target.write_text(text, encoding="utf-8")
    for wheel, dest in ((tvm_wheel, tvm_dir), (msgspec_wheel, site)):
        with zipfile.ZipFile(wheel) as archive:
            extract(archive, [n for n in archive.namelist() if not n.endswith("/")], dest)
    manifest = {
        "format": FORMAT,
        "sglang": SGLANG,
        "tvm_ffi": TVM_FFI,
        "msgspec": MSGSPEC,
        "wheels": {w.name: sha256(w) for w in (sglang_wheel, tvm_wheel, msgspec_wheel)},
        # The ABI tag of each compiled wheel (cp312, abi3, ...): which CPython the bundle imports on.
        "abi": {"tvm_ffi": abi_tag(tvm_wheel), "msgspec": abi_tag(msgspec_wheel)},
        "taken": list(TAKEN),
        "stand_ins": {
            name: " ".join(why.replace(" (lines {lines})", "").split()) for name, why in STAND_INS.items()
        },
        "reference": list(REFERENCE),
    }
    (out / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="the bundle folder from the pinned wheels (no GPU)")
    build_cmd.add_argument("--out", type=Path, default=DEFAULT_OUT, help="bundle folder (replaced)")
    build_cmd.add_argument("--wheels", type=Path, help="folder holding the wheels already (no download)")
    build_cmd.add_argument(
        "--python-version",
        default=RUNNING_PYTHON,
        help=f"CPython the probe runs with (default: this interpreter's, {RUNNING_PYTHON})",
    )
    build_cmd.add_argument(
        "--platform",
        action="append",
        help="manylinux tag(s) for pip download (default: manylinux 2014, 2_17, 2_28, 2_34 x86_64)",
    )
    prebuild_cmd = commands.add_parser(
        "prebuild", help="on a GPU node: build the JIT modules into SGLANG_JIT_CACHE_DIR, timed"
    )
    prebuild_cmd.add_argument(
        "--world-sizes", help="comma-separated TP sizes (default: v2's table for this GPU)"
    )
    prebuild_cmd.add_argument("--dtypes", default="bfloat16", help="comma-separated torch dtypes")
    prebuild_cmd.add_argument(
        "--with-flashinfer", action="store_true", help="load flashinfer.comm first (its tvm-ffi wins)"
    )
    prebuild_cmd.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.command == "prebuild":
        return prebuild(args)
    wheels = args.wheels
    if wheels is None:
        wheels = args.out.parent / "sglang-v2-wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        platforms = args.platform or [
            "manylinux2014_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux_2_28_x86_64",
            "manylinux_2_34_x86_64",
        ]
        download(wheels, args.python_version, platforms)
    manifest = build(wheels, args.out)
    print(
        f"{args.out}: sglang {manifest['sglang']}, tvm-ffi {manifest['tvm_ffi']}, msgspec {manifest['msgspec']}"
    )
    print(f"export TOPO_GATE_SGLANG_BUNDLE={args.out.resolve()}")
    return 0


def prebuild(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO))
    from topo_gate.trials.backends.custom_v2_prebuild import prebuild as build_modules

    sizes = [int(size) for size in args.world_sizes.split(",")] if args.world_sizes else None
    result = build_modules(
        world_sizes=sizes, dtypes=args.dtypes.split(","), with_flashinfer=args.with_flashinfer
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['device']} (SM {result['capability']}), torch {result['torch']}, tvm-ffi {result['tvm_ffi']}"
    )
    for step, seconds in result["seconds"].items():
        print(f"  {seconds:8.2f} s  {step}")
    cache = result["cache"]
    print(f"cache {cache['path']}: {cache['bytes'] / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
