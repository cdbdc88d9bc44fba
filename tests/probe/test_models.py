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
