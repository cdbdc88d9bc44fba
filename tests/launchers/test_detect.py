"""Launcher detection from the command line ``topo-gate exec`` is given."""

from __future__ import annotations

import pytest

from topo_gate.launchers.command.parse import detect_launcher


@pytest.mark.parametrize(
    ("argv", "launcher"),
    [
        (["python", "-m", "sglang.launch_server", "--model-path", "m"], "sglang"),
        (["/opt/venv/bin/python3.12", "-m", "sglang.launch_server"], "sglang"),
        (["sglang", "serve", "--model-path", "m"], "sglang"),
        (["vllm", "serve", "meta-llama/Llama-3.1-8B", "-tp", "2"], "vllm"),
        (["/usr/local/bin/vllm", "serve", "m"], "vllm"),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
        (["trtllm-serve", "m", "--tp_size", "8"], "trtllm"),
        (["python3", "-m", "tensorrt_llm.commands.serve", "m"], "trtllm"),
        (["numactl", "--cpunodebind=0", "vllm", "serve", "m"], "vllm"),
        (["env", "A=1", "trtllm-serve", "m"], "trtllm"),
    ],
)
def test_detected(argv: list[str], launcher: str) -> None:
    assert detect_launcher(argv) == launcher


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "serve.py"],
        ["vllm", "bench", "latency"],  # vllm, but not the server
        ["python", "-m", "vllm"],  # a bare package, not a server module
        ["./run.sh", "--model", "sglang"],
    ],
)
def test_not_detected(argv: list[str]) -> None:
    assert detect_launcher(argv) is None
