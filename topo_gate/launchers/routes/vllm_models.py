"""How the served architecture changes vLLM's all-reduce before an RMSNorm, by the sets extracted from
each release (its manifest's ``"architectures"``, scripts/extract_architectures.py says how).

- *direct*: the NVIDIA model code calls the fused all-reduce + RMSNorm kernel at its norm sites, up to
  the capability's default fusion size, whatever the pass, its size and the compilation mode say
  (DeepSeek-V3.2 / GLM-5.2, MiniMax-M3; in 0.34.0 Qwen3.5 too, which on CUDA runs uncompiled);
- *deferring* (0.34.0: Mistral Large 4): as direct, but only where ``fuse_allreduce_rms`` resolves on
  (and a bf16 model); otherwise the plain all-reduce and the norm;
- *mixed sites* (Kimi-K3): only some sites call the kernel (its latent-MoE output); the others are the
  pass's or, uncompiled, the plain chain's;
- everything else fuses through the compilation pass where vLLM compiles the model, and not at all
  where it does not (breakable CUDA graphs, ``vllm_compile``);
- *model-private* (0.34.0: MiniMax-M3, MuseSpark): up to a token limit the model runs an all-reduce
  kernel of its own, a Lamport mailbox it multicasts into, so only where NVLink multicast is; no trial
  times it (``model_private_vllm``), so a plan never replaces it. The models' further gates (MiniMax-M3:
  the SM 10.x family, bf16, no expert parallelism; MuseSpark: its config's switch) are not read: the
  marker covers those batches wherever multicast is, so a plan leaves them alone even where the model
  would fall back to the standard path -- a plan that misses a saving there, never one that is slower.
"""

from __future__ import annotations

from typing import Any

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Context, marker
from topo_gate.launchers.routes.vllm_release import LAUNCHER, cites

CITES = cites(
    {
        "direct_callers": (
            "models/deepseek_v32/nvidia/model.py",
            {"0.33.0": "122-166,318-321", "0.34.0": "124-168,328-331"},
        ),
        "direct_kimi_k3": (
            "models/kimi_k3/nvidia/latent_moe_runner.py",
            {"0.33.0": "385-420", "0.34.0": "381-416"},
        ),
        "direct_minimax_m3": (
            "models/minimax_m3/nvidia/model.py",
            {"0.33.0": "764-790", "0.34.0": "1326-1401"},
        ),
        "direct_qwen3_5": ("models/qwen3_5/nvidia/model.py", {"0.34.0": "213-236,286-300,595-606"}),
        "qwen3_5_platform": ("models/qwen3_5/__init__.py", {"0.34.0": "15-37"}),
        "deferring": ("models/mistral/mistral_large4/nvidia/model.py", {"0.34.0": "57-66,119-126"}),
        "private_minimax_m3": ("models/minimax_m3/nvidia/model.py", {"0.34.0": "152,1335-1351,1491-1530"}),
        "private_minimax_m3_gate": (
            "models/minimax_m3/nvidia/ops/finalize_allreduce_norm.py",
            {"0.34.0": "726-749"},
        ),
        "private_muse_spark": ("models/muse_spark/nvidia/model.py", {"0.34.0": "172,1676-1686,1806-1827"}),
        "private_muse_spark_kernel": (
            "models/muse_spark/nvidia/ops/all_reduce_dual_norm.py",
            {"0.34.0": "1-10"},
        ),
        "registry": (
            "model_executor/models/registry.py",
            {
                "0.33.0": "95-98,126,169-172,488-491,523-526",
                "0.34.0": "95-98,125,169-172,181-184,207-208,489-496,537-540,574-577,635-642",
            },
        ),
    }
)

DIRECT, DEFERRING, MIXED, PASS = "direct", "deferring", "mixed_sites", "pass"
#: Manifest key of each class that fuses in the model (the rest fuse through the pass, if at all).
_CLASS_KEYS = {
    DIRECT: "fused_norm_direct",
    DEFERRING: "fused_norm_deferring",
    MIXED: "fused_norm_mixed_sites",
}
MODEL_PRIVATE = marker("model_private", LAUNCHER)
#: The compiled-pass model every architecture outside the extracted sets is (the generic variant).
GENERIC_ARCHITECTURE = "LlamaForCausalLM"


def architecture_sets(release: str | None) -> dict[str, Any]:
    """The release's extracted architecture sets (None: the newest)."""
    sets: dict[str, Any] = knobs.manifest(LAUNCHER, release)["architectures"]
    return sets


def fusing_class(architecture: str | None, release: str | None) -> str:
    """``DIRECT``, ``DEFERRING``, ``MIXED`` or ``PASS`` (the architecture fuses through the pass alone)."""
    sets = architecture_sets(release)
    return next((name for name, key in _CLASS_KEYS.items() if architecture in sets[key]), PASS)


def private_tokens(ctx: Context) -> int | None:
    """The batch (tokens) up to which the served model runs its own all-reduce kernel here, if any."""
    limit = architecture_sets(ctx.release)["model_private_allreduce"].get(ctx.served_architecture)
    return int(limit) if limit is not None and ctx.multicast and ctx.tp > 1 else None


def _routing_key(architecture: str, release: str | None) -> tuple[str, bool, int | None]:
    """What decides an architecture's norm-site routing: its class; for classes the pass serves,
    whether it runs uncompiled by default; its private kernel's token limit."""
    sets = architecture_sets(release)
    kind = fusing_class(architecture, release)
    uncompiled = kind in (PASS, MIXED) and architecture in sets["breakable_cudagraph"]
    return kind, uncompiled, sets["model_private_allreduce"].get(architecture)


def variants(release: str | None) -> tuple[str, ...]:
    """One architecture per routing class of ``release``: the generic compiled one first, then the
    first (by name) of each other class the extracted sets hold."""
    sets = architecture_sets(release)
    named = sorted(
        {
            *sets["breakable_cudagraph"],
            *sets["model_private_allreduce"],
            *(a for key in _CLASS_KEYS.values() for a in sets[key]),
        }
    )
    chosen = {_routing_key(GENERIC_ARCHITECTURE, release): GENERIC_ARCHITECTURE}
    for architecture in named:
        chosen.setdefault(_routing_key(architecture, release), architecture)
    return tuple(chosen.values())
