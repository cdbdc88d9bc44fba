"""scripts/release_watch.py, run offline on vLLM 0.33.0 -> 0.34.0, names what that release changed
under the 0.33.0 route model (../shared/ANCHORS.md, "Releases move under the route models").

Needs both vLLM wheels under TOPO_GATE_LAUNCHER_SOURCES (scripts/launcher_parsers.sh downloads them)
and runs in the parsers venv, whose interpreter builds vLLM's own parser for the option table.
Skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = os.environ.get("TOPO_GATE_LAUNCHER_SOURCES")
pytestmark = pytest.mark.skipif(
    not SOURCES or not all(next(Path(SOURCES).glob(f"vllm-{v}-*.whl"), None) for v in ("0.33.0", "0.34.0")),
    reason="TOPO_GATE_LAUNCHER_SOURCES holds no vllm 0.33.0 and 0.34.0 wheels",
)


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    work = tmp_path_factory.mktemp("watch")
    out = work / "report.md"
    argv = ["--launcher", "vllm", "--baseline", "0.33.0", "--from", str(SOURCES)]
    argv += ["--parsers-python", sys.executable, "--work", str(work), "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "release_watch.py"), *argv], capture_output=True, text=True
    )
    assert out.exists(), done.stderr
    return done.returncode, out.read_text(encoding="utf-8")


def _section(report: str, title: str) -> str:
    start = report.index(f"#### {title}")
    end = report.find("\n#### ", start + 1)
    return report[start : end if end != -1 else None]


def test_the_retarget_exits_non_zero(watched: tuple[int, str]) -> None:
    assert watched[0] == 1


def test_it_names_the_breakable_graph_set_changes(watched: tuple[int, str]) -> None:
    section = _section(watched[1], "No-compile")
    for architecture in (
        "Qwen3_5ForConditionalGeneration",
        "MistralLarge4ForCausalLM",
        "KimiK31ForConditionalGeneration",
    ):
        assert f"added `{architecture}`" in section, architecture


def test_it_names_the_model_private_kernels(watched: tuple[int, str]) -> None:
    section = _section(watched[1], "Model code")
    assert "model_private_allreduce" in section
    assert "MiniMaxM3" in section and "MuseSpark" in section


#: The six flags 0.34.0's EngineArgs adds (``vllm serve`` adds a seventh of its own,
#: ``--headless-client-handshake-address``).
NEW_ENGINE_FLAGS = (
    "--cache-aware-admission-threshold",
    "--cache-aware-admission-window",
    "--checkpoint-prepare-on-startup",
    "--enable-extensible-kv-cache",
    "--max-num-inflight-kv-loads",
    "--shuffle-safetensors-files",
)


def test_it_names_the_new_flags(watched: tuple[int, str]) -> None:
    section = _section(watched[1], "Option table")
    for flag in NEW_ENGINE_FLAGS:
        assert f"- added `{flag}`" in section, flag
    assert "removed" not in section.split("\n", 3)[-1]


#: The spans of the 0.33.0 route model whose text 0.34.0 changed (vllm/ omitted).
CHANGED_IN_0_34_0 = (
    "config/vllm.py:179-203,256-323",
    "distributed/device_communicators/cuda_communicator.py:56-166",
    "distributed/device_communicators/custom_all_reduce.py:117-118,134-149,186-289,496-511",
    "distributed/device_communicators/flashinfer_all_reduce.py:142-177",
    "distributed/device_communicators/flashinfer_all_reduce.py:393-519",
    "distributed/device_communicators/flashinfer_all_reduce.py:72-120,180-246",
    "models/common/ops/fused_allreduce_rms_norm.py:23-63",
    "models/minimax_m3/nvidia/model.py:764-790",
)


def test_it_names_the_changed_spans_and_shows_what_changed(watched: tuple[int, str]) -> None:
    section = _section(watched[1], "Cited spans")
    for key in CHANGED_IN_0_34_0:
        assert f"- changed `vllm/{key}`:" in section, key
    assert "0 gone" in section
    assert "hisparse_config" in section  # HiSparse forces FlashInfer's TRT-LLM backend
    assert "hidden_dim * element_size % 16 != 0" in section  # the 16-byte row check, standalone path


def test_it_says_whether_conformance_ran(watched: tuple[int, str]) -> None:
    section = _section(watched[1], "Conformance")
    assert "conformance not run:" in section or "exit " in section
