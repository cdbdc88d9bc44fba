"""The served model read from a launcher's command line as the launcher reads it, mapped to a preset or
a local folder's config.json; what cannot be told is a one-line problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo_gate.launchers.command.served_model import MAX_HIDDEN, VLLM_DEFAULT_MODEL, read_served_model


@pytest.mark.parametrize(
    ("launcher", "cmd", "name", "preset"),
    [
        ("vllm", ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "2"], "meta-llama/Llama-3.1-70B-Instruct", "llama-3-70b"),
        ("vllm", ["vllm", "serve", "--model", "Qwen/Qwen3-32B", "-tp", "2"], "Qwen/Qwen3-32B", "qwen3-32b"),
        ("vllm", ["vllm", "serve", "--model=Qwen/Qwen3-8B"], "Qwen/Qwen3-8B", "qwen3-8b"),
        # vLLM moves --model to the positional's place (argparse_utils.py:324-353), so it is served.
        ("vllm", ["vllm", "serve", "Qwen/Qwen3-8B", "--model", "Qwen/Qwen3-32B"], "Qwen/Qwen3-32B", "qwen3-32b"),
        ("vllm", ["vllm", "bench", "latency", "--model", "Qwen/Qwen3-32B", "-tp", "2", "--batch-size", "8"], "Qwen/Qwen3-32B", "qwen3-32b"),
        ("vllm", ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-14B"], "Qwen/Qwen3-14B", "qwen3-14b"),
        # No model named: vLLM serves ModelConfig.model's default.
        ("vllm", ["vllm", "serve", "-tp", "2"], VLLM_DEFAULT_MODEL, "qwen3-0.6b"),
        ("vllm", ["vllm", "bench", "latency", "-tp", "2"], VLLM_DEFAULT_MODEL, "qwen3-0.6b"),
        ("sglang", ["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8"], "deepseek-ai/DeepSeek-V3", "deepseek-v3"),
        ("sglang", ["python", "-m", "sglang.launch_server", "--model", "Qwen/Qwen3-32B"], "Qwen/Qwen3-32B", "qwen3-32b"),
        # argparse's abbreviation of --model-path, as SGLang's parser takes it.
        ("sglang", ["python", "-m", "sglang.launch_server", "--model-pa", "Qwen/Qwen3-32B"], "Qwen/Qwen3-32B", "qwen3-32b"),
        ("sglang", ["sglang", "serve", "Qwen/Qwen3-4B", "--tp-size", "2"], "Qwen/Qwen3-4B", "qwen3-4b"),
        ("sglang", ["python", "-m", "sglang.benchmark.one_batch", "--model-path", "meta-llama/Llama-3.1-70B-Instruct", "--tp-size", "2"], "meta-llama/Llama-3.1-70B-Instruct", "llama-3-70b"),
        ("trtllm", ["trtllm-serve", "openai/gpt-oss-120b", "--tp_size", "8"], "openai/gpt-oss-120b", "gpt-oss-120b"),
        ("trtllm", ["trtllm-serve", "serve", "--tp_size", "8", "openai/gpt-oss-20b"], "openai/gpt-oss-20b", "gpt-oss-20b"),
        ("trtllm", ["trtllm-bench", "--model", "meta-llama/Llama-3.1-70B-Instruct", "throughput", "--tp", "2"], "meta-llama/Llama-3.1-70B-Instruct", "llama-3-70b"),
        ("trtllm", ["trtllm-bench", "-m", "Qwen/Qwen3-32B", "throughput", "--tp", "2"], "Qwen/Qwen3-32B", "qwen3-32b"),
    ],
)  # fmt: skip
def test_the_model_cmd_names_maps_to_its_preset(launcher, cmd, name, preset) -> None:
    served = read_served_model(cmd, launcher)
    assert served.problem is None, served.problem
    assert (served.name, served.preset) == (name, preset)


def test_config_files_the_line_names_are_read(tmp_path: Path) -> None:
    vllm_config = tmp_path / "serve.yaml"
    vllm_config.write_text("model: Qwen/Qwen3-32B\ntensor-parallel-size: 2\n")
    served = read_served_model(["vllm", "serve", "--config", str(vllm_config)], "vllm")
    assert served.preset == "qwen3-32b"
    sglang_config = tmp_path / "sglang.yaml"
    sglang_config.write_text("model-path: deepseek-ai/DeepSeek-R1\n")
    served = read_served_model(
        ["python", "-m", "sglang.launch_server", "--config", str(sglang_config)], "sglang"
    )
    assert served.preset == "deepseek-r1"
    # TensorRT-LLM: a model key of the options file overrides the positional (llm_args | llm_args_dict).
    options = tmp_path / "extra.yaml"
    options.write_text("model: Qwen/Qwen3-8B\nenable_attention_dp: false\n")
    served = read_served_model(
        ["trtllm-serve", "Qwen/Qwen3-32B", "--extra_llm_api_options", str(options)], "trtllm"
    )
    assert served.preset == "qwen3-8b"


def write_config(folder: Path, data: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(data))
    return folder


def test_a_local_folder_is_read_from_its_config_json(tmp_path: Path) -> None:
    folder = write_config(
        tmp_path / "my-finetune",
        {
            "architectures": ["LlamaForCausalLM"],
            "hidden_size": 8192,
            "num_hidden_layers": 80,
            "vocab_size": 128256,
        },
    )
    served = read_served_model(["vllm", "serve", str(folder), "-tp", "2"], "vllm")
    assert served.problem is None and served.preset is None
    assert (served.hidden, served.layers, served.architecture) == (8192, 80, "LlamaForCausalLM")
    assert served.config == str(folder / "config.json")
    assert "hidden 8192, 80 layers, LlamaForCausalLM" in served.describe()


def test_a_multimodal_config_takes_its_text_configs_sizes(tmp_path: Path) -> None:
    # As topo_gate.models takes Llama 4's: the decoder's sizes, the top-level architecture.
    folder = write_config(
        tmp_path / "scout",
        {
            "architectures": ["Llama4ForConditionalGeneration"],
            "text_config": {"hidden_size": 5120, "num_hidden_layers": 48},
            "vision_config": {"hidden_size": 1408, "num_hidden_layers": 34},
        },
    )
    served = read_served_model(
        ["python", "-m", "sglang.launch_server", "--model-path", str(folder)], "sglang"
    )
    assert (served.hidden, served.layers, served.architecture) == (5120, 48, "Llama4ForConditionalGeneration")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object of model settings"),
        (json.dumps({"architectures": ["X"], "num_hidden_layers": 4}), "hidden_size: None is not a model's hidden_size"),
        (json.dumps({"architectures": ["X"], "hidden_size": MAX_HIDDEN + 1, "num_hidden_layers": 4}), "hidden_size"),
        (json.dumps({"architectures": ["X"], "hidden_size": 4096, "num_hidden_layers": True}), "num_hidden_layers"),
        (json.dumps({"architectures": [], "hidden_size": 4096, "num_hidden_layers": 32}), "architectures: no architecture"),
        ("[" * 100 + "]" * 100, "nested deeper"),
    ],
)  # fmt: skip
def test_a_malformed_config_is_a_one_line_problem(tmp_path: Path, content: str, words: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(content)
    served = read_served_model(["vllm", "serve", str(folder)], "vllm")
    assert served.problem is not None and "\n" not in served.problem
    assert served.problem.startswith(str(folder / "config.json")) and words in served.problem, served.problem
    assert served.hidden is None and served.preset is None


def test_a_config_json_that_is_no_regular_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "model" / "config.json").mkdir(parents=True)
    served = read_served_model(["vllm", "serve", str(tmp_path / "model")], "vllm")
    assert served.problem is not None and "is a directory" in served.problem


@pytest.mark.parametrize(
    ("launcher", "cmd", "words"),
    [
        ("vllm", ["vllm", "serve", "acme/secret-model-13b"], "the served model 'acme/secret-model-13b' is no preset and no local folder with a config.json"),
        ("sglang", ["python", "-m", "sglang.launch_server", "--tp", "2"], "CMD names no served model"),
        ("trtllm", ["trtllm-serve", "--tp_size", "2"], "CMD names no served model"),
        # Behind a wrapper script: only what the line says, never the launcher's default.
        ("vllm", ["./serve.sh", "-tp", "2"], "CMD names no served model"),
        ("vllm", ["vllm", "serve", "M", "--tensor-parallel-size"], "cannot be read from CMD"),
    ],
)  # fmt: skip
def test_a_model_that_cannot_be_told_says_why(launcher, cmd, words) -> None:
    served = read_served_model(cmd, launcher)
    assert served.problem is not None and words in served.problem, served.problem
    assert served.preset is None and served.hidden is None
