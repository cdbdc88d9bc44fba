"""The served model ``served_model`` reads is the one the pinned launchers' own parsers read.

Needs SGLang 0.5.23 and vLLM 0.33.0 (scripts/launcher_parsers.sh installs them); skipped where they
are not installed. On every line of the cmdline corpus the launcher reads, and on lines that name the
model in each way the launchers take it, the real parser's model (vLLM: ``model_tag`` where ``vllm
serve`` serves it, else ``model``; SGLang: ``model_path``) is ``read_served_model``'s name.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from topo_gate.launchers.command import parse as cmdline
from topo_gate.launchers.command.served_model import read_served_model

pytestmark = [pytest.mark.usefixtures("restore_environment"), pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cmdline_agreement.py"


@pytest.fixture(scope="module")
def agreement():
    pytest.importorskip("vllm.entrypoints.cli.serve")
    pytest.importorskip("sglang.srt.server_args")
    spec = importlib.util.spec_from_file_location("cmdline_agreement", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def real_model(agreement, argv: list[str]) -> tuple[bool, str | None]:
    """(whether the launcher reads the line, the model it serves)."""
    entry = cmdline.find_entry(argv)
    assert entry is not None
    real = agreement.RealVllm() if entry.launcher == "vllm" else agreement.RealSglang()
    reading, refused = agreement.real_reading(real, entry)
    if refused:
        return False, None
    namespace, _ = reading
    if entry.launcher == "sglang":
        return True, namespace.model_path
    tag = getattr(namespace, "model_tag", None) if entry.form == "serve" else None
    return True, tag if tag is not None else namespace.model


def model_lines(folder: Path) -> list[list[str]]:
    (folder / "v.yaml").write_text("model: Qwen/Qwen3-32B\ntensor-parallel-size: 2\n")
    (folder / "s.yaml").write_text("model-path: deepseek-ai/DeepSeek-R1\n")
    vllm_flat = ["python", "-m", "vllm.entrypoints.openai.api_server"]
    sglang = ["python", "-m", "sglang.launch_server"]
    return [
        ["vllm", "serve", "A/b", "-tp", "2"],
        ["vllm", "serve", "--model", "A/b"],
        ["vllm", "serve", "-tp", "2", "--model=A/b"],
        ["vllm", "serve", "--config", str(folder / "v.yaml")],
        ["vllm", "serve", "X/y", "--config", str(folder / "v.yaml")],
        ["vllm", "serve", "-tp", "2"],
        [*vllm_flat, "--model", "A/b"],
        [*vllm_flat, "--mod", "A/b"],  # ambiguous: both refuse
        [*vllm_flat, "--config", str(folder / "v.yaml")],
        [*sglang, "--model-path", "A/b"],
        [*sglang, "--model", "A/b"],
        [*sglang, "--model-pa", "A/b"],
        [*sglang, "--config", str(folder / "s.yaml")],
        [*sglang, "--config", str(folder / "s.yaml"), "--model-path", "C/d"],
        ["sglang", "serve", "A/b", "--tp-size", "2"],
    ]


def test_the_model_is_the_one_the_real_parser_reads(agreement, tmp_path) -> None:
    corpus = [argv for _, argv in agreement.cases() if cmdline.find_entry(argv) is not None]
    corpus = [argv for argv in corpus if cmdline.find_entry(argv).launcher in ("vllm", "sglang")]
    compared = 0
    for argv in corpus:  # a line the launcher refuses for another reason may still name its model
        read, model = real_model(agreement, argv)
        if read:
            assert read_served_model(argv, cmdline.find_entry(argv).launcher).name == model, argv
            compared += 1
    assert compared >= len(corpus) // 2
    for argv in model_lines(tmp_path):
        read, model = real_model(agreement, argv)
        ours = read_served_model(argv, cmdline.find_entry(argv).launcher)
        if read:
            assert ours.name == model, argv
        else:
            assert ours.name is None and "cannot be read from CMD" in (ours.problem or ""), argv
