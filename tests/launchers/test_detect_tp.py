"""Reading the TP size from a launcher's own command line."""

from __future__ import annotations

import pytest

from topo_gate.launchers.command.parse import TpFlagError, tp_from_command


@pytest.mark.parametrize(
    ("launcher", "argv", "tp"),
    [
        ("vllm", ["vllm", "serve", "M", "-tp", "4"], 4),
        ("vllm", ["vllm", "serve", "M", "--tensor-parallel-size=8"], 8),
        ("vllm", ["vllm", "serve", "M", "--tensor_parallel_size", "2"], 2),
        ("sglang", ["python", "-m", "sglang.launch_server", "--tp-size", "4"], 4),
        ("sglang", ["python", "-m", "sglang.launch_server", "--tp", "2"], 2),
        ("sglang", ["python", "-m", "sglang.launch_server", "--tensor-parallel-size", "8"], 8),
        ("trtllm", ["trtllm-serve", "M", "--tp_size", "8"], 8),
        ("vllm", ["vllm", "serve", "M", "-tp", "2", "-tp", "4"], 4),  # the last one wins, as in argparse
        ("vllm", ["vllm", "serve", "M"], None),
        ("sglang", ["vllm", "serve", "M", "-tp", "4"], None),  # another launcher's flag
    ],
)
def test_tp_flags(launcher: str, argv: list[str], tp: int | None) -> None:
    assert tp_from_command(argv, launcher) == tp


@pytest.mark.parametrize("value", ["four", "0", ""])
def test_a_tp_flag_without_a_size_is_rejected(value: str) -> None:
    with pytest.raises(TpFlagError):
        tp_from_command(["vllm", "serve", "M", "-tp", value], "vllm")
