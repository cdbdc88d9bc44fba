"""``scripts/sglang_v2_bundle.py build`` and the backend's side of it (``custom_v2_bundle.activate``).

The script is run as a user runs it, on wheels built here with the layout of the real ones (so the
test needs no network); with the real wheels (``TOPO_GATE_LAUNCHER_SOURCES``) the bundle's SGLang
files are imported in a fresh interpreter, which must not pull in the server.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from topo_gate.trials.backends import custom_v2_bundle

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "sglang_v2_bundle.py"
CONFIG = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
#: The CPython tag of the interpreter running the tests: the fake compiled wheels are built for it.
RUNNING = f"cp{sys.version_info.major}{sys.version_info.minor}"
COMMON = """import heavy_server_dependency


@lru_cache(maxsize=1)
def is_cuda():
    return torch.cuda.is_available() and torch.version.cuda is not None


def not_needed():
    return heavy_server_dependency.start()


def get_cuda_version():
    if torch.version.cuda:
        return tuple(map(int, torch.version.cuda.split(".")))
    return (0, 0)
"""
SGLANG_FILES = {
    "sglang/__init__.py": "import heavy_server_dependency\n",
    "sglang/kernels/__init__.py": "",
    "sglang/kernels/ops/communication/all_reduce.py": "import tvm_ffi\n",
    "sglang/kernels/jit/csrc/distributed/custom_all_reduce.cuh": "// kernel\n",
    "sglang/srt/environ.py": "envs = None\n",
    "sglang/srt/debug_utils/__init__.py": "",
    "sglang/srt/debug_utils/cuda_coredump.py": "",
    "sglang/srt/debug_utils/dumper.py": "import heavy_server_dependency\n",
    "sglang/srt/distributed/__init__.py": "from sglang.srt.distributed.parallel_state import *\n",
    "sglang/srt/distributed/device_communicators/configs/__init__.py": "",
    CONFIG: "TABLE = {}\n",
    "sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py": "class CustomAllReduceV2: ...\n",
    "sglang/srt/utils/__init__.py": "from sglang.srt.utils.common import *\n",
    "sglang/srt/utils/common.py": COMMON,
}


def wheel(folder: Path, name: str, files: dict[str, str]) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel(folder, f"sglang-0.5.23-{RUNNING}-{RUNNING}-manylinux_2_34_x86_64.whl", SGLANG_FILES)
    wheel(folder, f"apache_tvm_ffi-0.1.11-{RUNNING}-abi3-manylinux2014_x86_64.whl", {
        "tvm_ffi/__init__.py": "__version__ = '0.1.11'\n",
        "apache_tvm_ffi-0.1.11.dist-info/METADATA": "Name: apache-tvm-ffi\nVersion: 0.1.11\n",
    })  # fmt: skip
    wheel(folder, f"msgspec-0.23.0-{RUNNING}-{RUNNING}-manylinux2014_x86_64.whl", {"msgspec/__init__.py": ""})
    return folder


def build(wheels: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "build", "--wheels", str(wheels), "--out", str(out)],
        capture_output=True,
        text=True,
    )


def test_build_takes_the_kernels_and_labels_every_stand_in(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    (out / "site").mkdir(parents=True)
    (out / "site" / "stale.py").write_text("left from an earlier build")
    done = build(wheels, out)
    assert done.returncode == 0, done.stderr
    assert f"export TOPO_GATE_SGLANG_BUNDLE={out.resolve()}" in done.stdout
    site = out / "site"
    for member in ("sglang/kernels/ops/communication/all_reduce.py", "sglang/srt/environ.py", CONFIG,
                   "sglang/kernels/jit/csrc/distributed/custom_all_reduce.cuh"):  # fmt: skip
        assert (site / member).read_text() == SGLANG_FILES[member]
    # what would import the server is not taken: dumper.py, the distributed package's initialiser
    assert not (site / "sglang/srt/debug_utils/dumper.py").exists()
    assert not (site / "sglang/srt/distributed/__init__.py").exists()
    assert not (site / "stale.py").exists()
    for stand_in in ("sglang/__init__.py", "sglang/srt/utils/__init__.py", "sglang/srt/utils/common.py"):
        text = (site / stand_in).read_text()
        assert text.startswith('"""STAND-IN written by topo-gate'), stand_in
        assert "heavy_server_dependency" not in text
    common = (site / "sglang/srt/utils/common.py").read_text()
    assert COMMON.split("\n\n\n")[1] in common and COMMON.split("\n\n\n")[3].rstrip() in common
    assert "not_needed" not in common and "(lines 4-6, 13-16)" in common
    namespace: dict[str, object] = {}
    # the stand-in runs: the two functions, as in SGLang
    exec(compile(common, "common.py", "exec"), namespace)
    assert isinstance(namespace["get_cuda_version"](), tuple)  # type: ignore[operator]
    assert (out / "tvm_ffi" / "tvm_ffi" / "__init__.py").exists()
    assert (out / "tvm_ffi" / "apache_tvm_ffi-0.1.11.dist-info" / "METADATA").exists()
    assert not (site / "tvm_ffi").exists()  # kept apart: another tvm-ffi may win (custom_v2_bundle)
    assert (site / "msgspec" / "__init__.py").exists()
    assert (
        out / "reference" / "sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py"
    ).exists()
    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["format"] == custom_v2_bundle.BUNDLE_FORMAT
    assert (manifest["sglang"], manifest["tvm_ffi"]) == (custom_v2_bundle.PINNED_SGLANG, "0.1.11")
    assert manifest["wheels"] == {
        w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels.iterdir()
    }
    assert set(manifest["stand_ins"]) == {
        "sglang/__init__.py",
        "sglang/srt/utils/__init__.py",
        "sglang/srt/utils/common.py",
    }


def test_build_refuses_a_wheel_without_what_the_kernels_need(wheels: Path, tmp_path: Path) -> None:
    files = {name: text for name, text in SGLANG_FILES.items() if name != CONFIG}
    wheel(wheels, "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl", files)
    done = build(wheels, tmp_path / "bundle")
    assert done.returncode != 0
    assert f"the SGLang wheel lacks {CONFIG}" in done.stderr
    done = build(tmp_path / "empty", tmp_path / "bundle")
    assert "no sglang-0.5.23-*.whl in" in done.stderr


def _manifest(folder: Path, **fields: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bundle.json").write_text(json.dumps(fields))
    return folder


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (None, "no readable bundle.json"),
        ({"format": "something/else"}, "is not a topo-gate/sglang-v2-bundle/v1 manifest"),
        ({"format": custom_v2_bundle.BUNDLE_FORMAT, "sglang": "0.5.22"}, "holds sglang 0.5.22; this backend reproduces 0.5.23"),
    ],
)  # fmt: skip
def test_activate_refuses_a_folder_that_is_not_the_pinned_bundle(
    tmp_path: Path, fields: dict[str, object] | None, expected: str
) -> None:
    folder = tmp_path / "bundle"
    if fields is not None:
        _manifest(folder, **fields)
    reason = custom_v2_bundle.activate({custom_v2_bundle.ENV: str(folder)})
    assert reason is not None and expected in reason and str(folder) in reason


def _fresh_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, cwd=REPO
    )


def test_activate_puts_the_bundle_first_and_its_tvm_ffi_last(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    assert build(wheels, out).returncode == 0
    code = (
        "import sys\nfrom topo_gate.trials.backends import custom_v2_bundle as b\n"
        "reason = b.activate()\nprint(repr(reason))\n"
        f"print(sys.path.index({str((out / 'site').resolve())!r}) == 0, sys.path[-1] == {str((out / 'tvm_ffi').resolve())!r})"
    )
    done = _fresh_python(code, {custom_v2_bundle.ENV: str(out), "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["None", "True True"]  # every module the backend imports is found


@pytest.mark.skipif(
    not os.environ.get("TOPO_GATE_LAUNCHER_SOURCES"), reason="TOPO_GATE_LAUNCHER_SOURCES not set"
)
def test_the_real_bundle_imports_sglangs_files_without_the_server(tmp_path: Path) -> None:
    sources = Path(os.environ["TOPO_GATE_LAUNCHER_SOURCES"])
    needed = ("sglang-0.5.23-*.whl", "apache_tvm_ffi-0.1.11-*.whl", "msgspec-0.23.0-*.whl")
    if not all(list(sources.glob(pattern)) for pattern in needed):
        pytest.skip(f"{sources} lacks one of {', '.join(needed)}")
    out = tmp_path / "bundle"
    done = build(sources, out)
    assert done.returncode == 0, done.stderr
    # sglang.kernels needs the bundle's compiled msgspec and tvm-ffi, built for the GPU machine's
    # CPython; the pure-Python files are imported here (the GPU run imports the rest).
    code = (
        "import sys\n"
        "import sglang.srt.environ\n"
        "from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as c\n"
        "from sglang.srt.utils.common import get_cuda_version, is_cuda\n"
        "assert 2 in c._sm90_configs(132) and isinstance(get_cuda_version(), tuple)\n"
        "print(sorted(m for m in sys.modules if m.startswith('sglang.srt')))\n"
    )
    done = _fresh_python(code, {"PYTHONPATH": str(out / "site")})
    assert done.returncode == 0, done.stderr
    loaded = set(eval(done.stdout.splitlines()[-1]))  # noqa: S307 -- our own subprocess's repr of a list
    assert "sglang.srt.server_args" not in loaded and "sglang.srt.distributed.parallel_state" not in loaded


def test_kernels_missing_agrees_with_activate_on_a_built_bundle_without_touching_the_path(
    wheels: Path, tmp_path: Path
) -> None:
    out = tmp_path / "bundle"
    assert build(wheels, out).returncode == 0
    before = list(sys.path)
    assert custom_v2_bundle.kernels_missing({custom_v2_bundle.ENV: str(out)}) is None
    assert sys.path == before and "sglang" not in sys.modules  # asked, not imported
    (out / "site" / "sglang" / "kernels" / "ops" / "communication" / "all_reduce.py").unlink()
    reason = custom_v2_bundle.kernels_missing({custom_v2_bundle.ENV: str(out)})
    assert reason == "sglang.kernels.ops.communication.all_reduce not importable"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (None, "no readable bundle.json"),
        ({"format": custom_v2_bundle.BUNDLE_FORMAT, "sglang": "0.5.22"}, "holds sglang 0.5.22; this backend reproduces 0.5.23"),
    ],
)  # fmt: skip
def test_kernels_missing_names_a_folder_that_is_not_the_pinned_bundle(
    tmp_path: Path, fields: dict[str, object] | None, expected: str
) -> None:
    folder = tmp_path / "bundle"
    if fields is not None:
        _manifest(folder, **fields)
    reason = custom_v2_bundle.kernels_missing({custom_v2_bundle.ENV: str(folder)})
    assert reason is not None and expected in reason and str(folder) in reason


def test_kernels_missing_without_a_bundle_asks_for_the_pinned_release() -> None:
    try:
        importlib.metadata.version("sglang")
        pytest.skip("an sglang is installed here")
    except importlib.metadata.PackageNotFoundError:
        pass
    reason = custom_v2_bundle.kernels_missing({})
    assert reason is not None and "pip install sglang==0.5.23" in reason


def test_a_bundle_of_another_cpython_is_refused_before_any_trial(wheels: Path, tmp_path: Path) -> None:
    """A bundle whose compiled wheels are another CPython's (3.12's on 3.11) does not import: the
    probe says so up front, with the fix, instead of timing nothing and calling it usable."""
    other = "cp399"
    msgspec = next(wheels.glob("msgspec-*.whl"))
    msgspec.rename(wheels / msgspec.name.replace(f"-{RUNNING}-{RUNNING}-", f"-{other}-{other}-"))
    out = tmp_path / "bundle"
    assert build(wheels, out).returncode == 0
    assert json.loads((out / "bundle.json").read_text(encoding="utf-8"))["abi"]["msgspec"] == other
    reason = custom_v2_bundle.kernels_missing({custom_v2_bundle.ENV: str(out)})
    assert reason is not None and f"msgspec built for {other}, this interpreter is {RUNNING}" in reason
    assert "python scripts/sglang_v2_bundle.py build" in reason


def test_a_module_that_is_there_but_fails_to_import_is_named(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    assert build(wheels, out).returncode == 0
    broken = out / "site" / "sglang" / "srt" / "environ.py"
    broken.write_text("raise ImportError('compiled for another Python')\n", encoding="utf-8")
    reason = custom_v2_bundle.kernels_missing({custom_v2_bundle.ENV: str(out)})
    assert reason is not None and reason.startswith("importing sglang.srt.environ fails in ")
    assert reason.endswith("ImportError: compiled for another Python")


def test_build_takes_this_interpreters_wheels_by_default() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "build", "--help"], capture_output=True, text=True)
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"(default: this interpreter's, {running})" in " ".join(done.stdout.split())
