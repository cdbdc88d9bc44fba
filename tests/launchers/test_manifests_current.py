"""The knob manifests are what scripts/extract_knobs.py reads from the pinned releases.

Needs the release files, which are large and not in the repository: point TOPO_GATE_LAUNCHER_SOURCES
at a folder holding the wheel of every modelled SGLang and vLLM release (``sglang-0.5.23-*.whl``,
``vllm-0.33.0-*.whl``, ``vllm-0.34.0-*.whl``) and each modelled FlashInfer release's
``comm/trtllm_ar.py`` below a folder named for it (``flashinfer_python-0.7.4/.../comm/trtllm_ar.py``,
or its unpacked wheel). Skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topo_gate.launchers.knobs import LIBRARY_RELEASES, PINNED, SUPPORTED

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "topo_gate" / "launchers" / "data"
SOURCES = os.environ.get("TOPO_GATE_LAUNCHER_SOURCES")
pytestmark = pytest.mark.skipif(not SOURCES, reason="TOPO_GATE_LAUNCHER_SOURCES not set")


def _extract(tmp_path: Path, *argv: str) -> dict:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "extract_knobs.py"), *argv, "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    (written,) = tmp_path.glob("knobs-*.json")
    return json.loads(written.read_text(encoding="utf-8"))


#: Every modelled release of the launchers whose manifests come from a wheel.
WHEEL_RELEASES = [(launcher, release) for launcher in ("sglang", "vllm") for release in SUPPORTED[launcher]]


@pytest.mark.parametrize(("launcher", "release"), WHEEL_RELEASES)
def test_wheel_manifest_is_current(launcher: str, release: str, tmp_path: Path) -> None:
    (wheel,) = Path(SOURCES).glob(f"{launcher}-{release}-*.whl")
    committed = json.loads((DATA / f"knobs-{launcher}-{release}.json").read_text(encoding="utf-8"))
    # all_options is read from the running parser, not the wheel's source (scripts/cmdline_agreement.py).
    committed.pop("all_options", None)
    assert _extract(tmp_path, launcher, str(wheel)) == committed


@pytest.mark.parametrize(("launcher", "release"), WHEEL_RELEASES)
def test_re_extracting_over_the_committed_manifest_rewrites_no_byte(
    launcher: str, release: str, tmp_path: Path
) -> None:
    (wheel,) = Path(SOURCES).glob(f"{launcher}-{release}-*.whl")
    committed = DATA / f"knobs-{launcher}-{release}.json"
    (tmp_path / committed.name).write_bytes(committed.read_bytes())
    _extract(tmp_path, launcher, str(wheel))
    assert (tmp_path / committed.name).read_bytes() == committed.read_bytes()


@pytest.mark.parametrize("version", LIBRARY_RELEASES["flashinfer"])
def test_flashinfer_manifest_is_current(version: str, tmp_path: Path) -> None:
    (source,) = [
        p
        for p in Path(SOURCES).rglob("trtllm_ar.py")
        if p.parent.name == "comm" and any(part.endswith(f"-{version}") for part in p.parts)
    ]
    committed = json.loads((DATA / f"knobs-flashinfer-{version}.json").read_text(encoding="utf-8"))
    assert _extract(tmp_path, "flashinfer", "--version", version, str(source)) == committed


def test_trtllm_manifest_is_current(tmp_path: Path) -> None:
    """TOPO_GATE_LAUNCHER_SOURCES also holds the TensorRT-LLM files the manifest names (the two C++
    headers and the Python excerpts, anywhere below it); each is re-extracted at its recorded commit."""
    committed = json.loads((DATA / f"knobs-trtllm-{PINNED['trtllm']}.json").read_text(encoding="utf-8"))
    files = committed["source"]["files"]
    found = {name: next(Path(SOURCES).rglob(name), None) for name in files}
    if None in found.values():
        pytest.skip(
            f"TensorRT-LLM sources not under TOPO_GATE_LAUNCHER_SOURCES: {sorted(n for n, p in found.items() if p is None)}"
        )
    pin = committed["source"]["commit"]
    read_at = [f"--read-at={name}={spec['commit']}" for name, spec in files.items() if spec["commit"] != pin]
    paths = [str(found[name]) for name in files]
    assert (
        _extract(tmp_path, "trtllm", "--version", PINNED["trtllm"], "--commit", pin, *paths, *read_at)
        == committed
    )
