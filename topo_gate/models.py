"""Model presets for ``probe --model``: the hidden size that sets the all-reduce message size.

A tensor-parallel decoder layer all-reduces a ``[tokens, hidden]`` activation after attention and
after the MLP/MoE, so the message is ``tokens x hidden x dtype bytes``; ``hidden`` is the one
model-specific number a probe needs.  Every number below is ``hidden_size`` from the model's
Hugging Face ``config.json`` (the repository is named in the comment).  ``dtype`` is the activation
dtype the launchers all-reduce in: bf16 for all of these, including FP8 / MXFP4 checkpoints
(DeepSeek-V3, Kimi K2, gpt-oss), whose quantized weights do not change the activation dtype.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelPreset:
    name: str
    hidden: int
    dtype: str = "bfloat16"


class UnknownModel(LookupError):
    """``--model`` named no preset; ``str()`` is one line with the closest names."""


_PRESETS: tuple[ModelPreset, ...] = (
    # meta-llama/Llama-3.1-8B, Llama-3.1-70B, Llama-3.1-405B (and 3.0 / 3.3 of the same sizes)
    ModelPreset("llama-3-8b", 4096),
    ModelPreset("llama-3-70b", 8192),
    ModelPreset("llama-3-405b", 16384),
    # meta-llama/Llama-3.2-1B, Llama-3.2-3B
    ModelPreset("llama-3.2-1b", 2048),
    ModelPreset("llama-3.2-3b", 3072),
    # meta-llama/Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E (text_config.hidden_size)
    ModelPreset("llama-4-scout", 5120),
    ModelPreset("llama-4-maverick", 5120),
    # deepseek-ai/DeepSeek-V3, DeepSeek-R1 (same architecture), DeepSeek-V3.1 / V3.2
    ModelPreset("deepseek-v3", 7168),
    ModelPreset("deepseek-r1", 7168),
    # moonshotai/Kimi-K2-Instruct (DeepseekV3ForCausalLM)
    ModelPreset("kimi-k2", 7168),
    # Qwen/Qwen3-0.6B, 1.7B, 4B, 8B, 14B, 32B
    ModelPreset("qwen3-0.6b", 1024),
    ModelPreset("qwen3-1.7b", 2048),
    ModelPreset("qwen3-4b", 2560),
    ModelPreset("qwen3-8b", 4096),
    ModelPreset("qwen3-14b", 5120),
    ModelPreset("qwen3-32b", 5120),
    # Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-480B-A35B-Instruct, Qwen3-Next-80B-A3B
    ModelPreset("qwen3-30b-a3b", 2048),
    ModelPreset("qwen3-235b-a22b", 4096),
    ModelPreset("qwen3-coder-480b-a35b", 6144),
    ModelPreset("qwen3-next-80b-a3b", 2048),
    # openai/gpt-oss-20b, openai/gpt-oss-120b
    ModelPreset("gpt-oss-20b", 2880),
    ModelPreset("gpt-oss-120b", 2880),
    # mistralai/Mixtral-8x7B-v0.1, Mixtral-8x22B-v0.1
    ModelPreset("mixtral-8x7b", 4096),
    ModelPreset("mixtral-8x22b", 6144),
)

PRESETS: dict[str, ModelPreset] = {preset.name: preset for preset in _PRESETS}


def _normalize(name: str) -> str:
    # Accept what people paste: "Qwen/Qwen3-32B", "Llama_3_70B", "meta-llama/Llama-3.1-70B-Instruct".
    key = name.strip().lower().rsplit("/", 1)[-1].replace("_", "-")
    for suffix in ("-instruct", "-chat", "-base"):
        key = key.removesuffix(suffix)
    return key.replace("llama-3.1-", "llama-3-").replace("llama-3.3-", "llama-3-").replace("meta-", "")


def lookup_model(name: str) -> ModelPreset:
    """The preset for ``name`` (case-insensitive; an org prefix and an -Instruct suffix are ignored).

    Raises ``UnknownModel`` with the closest preset names, so the CLI can print one helpful line.
    """
    key = _normalize(name)
    if key in PRESETS:
        return PRESETS[key]
    close = difflib.get_close_matches(key, PRESETS, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(PRESETS)}"
    raise UnknownModel(f"unknown model {name!r}: {hint} (or pass --hidden N)")
