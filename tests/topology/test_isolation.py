"""collect_isolated: a child process per collection, so a driver crash is an error, not a dead CLI."""

from __future__ import annotations

import ctypes.util
from pathlib import Path

import pytest
from capture_paths import CAPTURES, HERE
from replay_pynvml import make_replay_module
from test_nvml_replay import facts

from topo_gate.topology.capture import collect_isolated, load_capture
from topo_gate.topology.errors import NvmlCrash, NvmlUnavailable

pytestmark = pytest.mark.xdist_group("processes")

H100 = CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json"


@pytest.fixture
def binding_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The child imports the replay module by name: put it and replay_pynvml on its path.
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{HERE}")
    return tmp_path


def test_collects_in_a_child_process(binding_dir: Path) -> None:
    binding = make_replay_module(binding_dir, H100)
    assert facts(collect_isolated(timeout_s=60, binding=binding)) == facts(load_capture(H100))


def test_a_segfault_names_the_query_in_flight_and_keeps_the_answers_before_it(binding_dir: Path) -> None:
    binding = make_replay_module(binding_dir, H100, crash_on=("nvmlDeviceGetGpuFabricInfoV", 1))
    with pytest.raises(NvmlCrash) as crash:
        collect_isolated(timeout_s=60, binding=binding)
    assert crash.value.query == "nvmlDeviceGetGpuFabricInfoV(gpu 1)"
    assert crash.value.why == "killed by SIGSEGV"
    assert crash.value.partial["nvmlDeviceGetName(gpu 1)"] == "NVIDIA H100 80GB HBM3"
    assert crash.value.partial["nvmlDeviceGetNvLinkRemoteDeviceType(gpu 1, link 17)"] == 2
    assert "nvmlDeviceGetGpuFabricInfoV(gpu 1)" not in crash.value.partial


@pytest.mark.slow
def test_a_hang_is_a_crash_after_the_timeout(binding_dir: Path) -> None:
    (binding_dir / "hanging_binding.py").write_text(
        "import sys, time\n"
        "from replay_pynvml import ReplayNvml\n"
        "from topo_gate.topology.capture import load_capture\n"
        "class Hanging(ReplayNvml):\n"
        "    def nvmlDeviceGetCount(self):\n"
        "        time.sleep(600)\n"
        f"sys.modules[__name__] = Hanging(load_capture({str(H100)!r}))\n"
    )
    # 10 s: room for the child to start and reach the hanging query on a loaded machine.
    with pytest.raises(NvmlCrash) as crash:
        collect_isolated(timeout_s=10, binding="hanging_binding")
    assert crash.value.query == "nvmlDeviceGetCount()"
    assert crash.value.why == "no answer within 10 s"
    assert crash.value.partial["nvmlSystemGetDriverVersion()"] == "570.124.06"


def test_a_lost_gpu_is_a_crash(binding_dir: Path, tmp_path: Path) -> None:
    data = H100.read_text().replace(
        '"numa_node": 1', '"numa_node": {"unknown": "gpu_lost", "detail": "lost"}', 1
    )
    lost = tmp_path / "lost.json"
    lost.write_text(data)
    with pytest.raises(NvmlCrash, match="a GPU fell off the bus") as crash:
        collect_isolated(timeout_s=60, binding=make_replay_module(binding_dir, lost))
    assert crash.value.query == "nvmlDeviceGetNumaNodeId(gpu 4)"


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML")
def test_no_driver_is_unavailable_with_the_real_binding() -> None:
    with pytest.raises(NvmlUnavailable, match="^no NVIDIA driver/NVML found"):
        collect_isolated(timeout_s=60)
