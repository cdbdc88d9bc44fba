"""Model presets for ``probe --model`` and the planners: the numbers the all-reduce depends on.

A tensor-parallel decoder layer all-reduces a ``[tokens, hidden]`` activation after attention and
after the MLP/MoE, so the message is ``tokens x hidden x dtype bytes``; ``hidden`` is the one
model-specific number a probe needs. A plan prices a step with ``layers`` (each layer all-reduces
twice), and the launchers route by ``architecture`` (SGLang switches its FlashInfer fusion on for
some; a few vLLM model implementations call the fused kernel themselves). Every number below is from
the model's Hugging Face ``config.json`` (the repository is named in the comment): ``hidden_size``,
``num_hidden_layers`` and ``architectures[0]`` (``text_config``'s numbers for the multimodal Llama 4).
``dtype`` is the activation dtype the launchers all-reduce in: bf16 for all of these, including FP8 /
MXFP4 checkpoints (DeepSeek-V3, Kimi K2, gpt-oss), whose quantized weights do not change it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelPreset:
    name: str
    hidden: int
    dtype: str = "bfloat16"
    #: ``num_hidden_layers``: decoder layers, each with two TP all-reduces (attention, MLP/MoE).
    layers: int | None = None
    #: ``architectures[0]``: the class name the launchers' model registries dispatch on.
    architecture: str | None = None


class UnknownModel(LookupError):
    """``--model`` named no preset; ``str()`` is one line with the closest names."""


_LLAMA = "LlamaForCausalLM"
_LLAMA4 = "Llama4ForConditionalGeneration"
_DEEPSEEK_V3 = "DeepseekV3ForCausalLM"
_QWEN3 = "Qwen3ForCausalLM"
_QWEN3_MOE = "Qwen3MoeForCausalLM"

_PRESETS: tuple[ModelPreset, ...] = (
    # meta-llama/Llama-3.1-8B, Llama-3.1-70B, Llama-3.1-405B (and 3.0 / 3.3 of the same sizes)
    ModelPreset("llama-3-8b", 4096, layers=32, architecture=_LLAMA),
    ModelPreset("llama-3-70b", 8192, layers=80, architecture=_LLAMA),
    ModelPreset("llama-3-405b", 16384, layers=126, architecture=_LLAMA),
    # meta-llama/Llama-3.2-1B, Llama-3.2-3B
    ModelPreset("llama-3.2-1b", 2048, layers=16, architecture=_LLAMA),
    ModelPreset("llama-3.2-3b", 3072, layers=28, architecture=_LLAMA),
    # meta-llama/Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E (text_config.hidden_size / layers)
    ModelPreset("llama-4-scout", 5120, layers=48, architecture=_LLAMA4),
    ModelPreset("llama-4-maverick", 5120, layers=48, architecture=_LLAMA4),
    # deepseek-ai/DeepSeek-V3, DeepSeek-R1 (same architecture), DeepSeek-V3.1
    ModelPreset("deepseek-v3", 7168, layers=61, architecture=_DEEPSEEK_V3),
    ModelPreset("deepseek-r1", 7168, layers=61, architecture=_DEEPSEEK_V3),
    # deepseek-ai/DeepSeek-V3.2 (DSA: its own architecture, which vLLM fuses at every norm site itself)
    ModelPreset("deepseek-v3.2", 7168, layers=61, architecture="DeepseekV32ForCausalLM"),
    # moonshotai/Kimi-K2-Instruct (DeepseekV3ForCausalLM)
    ModelPreset("kimi-k2", 7168, layers=61, architecture=_DEEPSEEK_V3),
    # Qwen/Qwen3-0.6B, 1.7B, 4B, 8B, 14B, 32B
    ModelPreset("qwen3-0.6b", 1024, layers=28, architecture=_QWEN3),
    ModelPreset("qwen3-1.7b", 2048, layers=28, architecture=_QWEN3),
    ModelPreset("qwen3-4b", 2560, layers=36, architecture=_QWEN3),
    ModelPreset("qwen3-8b", 4096, layers=36, architecture=_QWEN3),
    ModelPreset("qwen3-14b", 5120, layers=40, architecture=_QWEN3),
    ModelPreset("qwen3-32b", 5120, layers=64, architecture=_QWEN3),
    # Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-480B-A35B-Instruct, Qwen3-Next-80B-A3B-Instruct
    ModelPreset("qwen3-30b-a3b", 2048, layers=48, architecture=_QWEN3_MOE),
    ModelPreset("qwen3-235b-a22b", 4096, layers=94, architecture=_QWEN3_MOE),
    ModelPreset("qwen3-coder-480b-a35b", 6144, layers=62, architecture=_QWEN3_MOE),
    ModelPreset("qwen3-next-80b-a3b", 2048, layers=48, architecture="Qwen3NextForCausalLM"),
    # openai/gpt-oss-20b, openai/gpt-oss-120b
    ModelPreset("gpt-oss-20b", 2880, layers=24, architecture="GptOssForCausalLM"),
    ModelPreset("gpt-oss-120b", 2880, layers=36, architecture="GptOssForCausalLM"),
    # mistralai/Mixtral-8x7B-v0.1, Mixtral-8x22B-v0.1
    ModelPreset("mixtral-8x7b", 4096, layers=32, architecture="MixtralForCausalLM"),
    ModelPreset("mixtral-8x22b", 6144, layers=56, architecture="MixtralForCausalLM"),
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
