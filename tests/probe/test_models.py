"""Model presets: names people paste resolve; unknown names get close matches in one line."""

from __future__ import annotations

import pytest

from topo_gate.models import PRESETS, UnknownModel, lookup_model


@pytest.mark.parametrize(
    ("name", "hidden"),
    [
        ("llama-3-70b", 8192),
        ("meta-llama/Llama-3.1-70B-Instruct", 8192),
        ("Llama-3.3-70B-Instruct", 8192),
        ("deepseek-ai/DeepSeek-R1", 7168),
        ("Qwen/Qwen3-235B-A22B", 4096),
        ("Qwen3_32B", 5120),
        ("openai/gpt-oss-120b", 2880),
        ("moonshotai/Kimi-K2-Instruct", 7168),
    ],
)
def test_pasted_names_resolve(name, hidden):
    assert lookup_model(name).hidden == hidden


def test_unknown_name_suggests_close_presets_in_one_line():
    with pytest.raises(UnknownModel) as raised:
        lookup_model("llama3-70")
    message = str(raised.value)
    assert "\n" not in message and "llama-3-70b" in message and "--hidden" in message


def test_every_preset_is_a_plausible_activation_width():
    # Hidden sizes are multiples of 64 (tensor-core tiles); a typo like 71680 would not be.
    for preset in PRESETS.values():
        assert preset.hidden % 64 == 0 and 1024 <= preset.hidden <= 16384, preset
        assert preset.dtype == "bfloat16"


def test_every_preset_names_its_layers_and_architecture():
    # The planner prices a step with the layer count; the launchers route by the architecture.
    for preset in PRESETS.values():
        assert preset.layers is not None and 16 <= preset.layers <= 128, preset
        assert preset.architecture is not None and preset.architecture.endswith(
            ("ForCausalLM", "ForConditionalGeneration")
        ), preset


@pytest.mark.parametrize(
    ("name", "layers", "architecture"),
    [
        ("deepseek-ai/DeepSeek-V3", 61, "DeepseekV3ForCausalLM"),
        ("deepseek-v3.2", 61, "DeepseekV32ForCausalLM"),
        ("meta-llama/Llama-3.1-70B-Instruct", 80, "LlamaForCausalLM"),
        ("Qwen/Qwen3-32B", 64, "Qwen3ForCausalLM"),
        ("Qwen/Qwen3-235B-A22B", 94, "Qwen3MoeForCausalLM"),
        ("openai/gpt-oss-120b", 36, "GptOssForCausalLM"),
    ],
)
def test_presets_carry_the_hf_config_numbers(name, layers, architecture):
    preset = lookup_model(name)
    assert (preset.layers, preset.architecture) == (layers, architecture)
