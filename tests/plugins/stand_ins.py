"""Labelled stand-ins of the pinned launchers' parsed configurations, for the plugin tests.

This venv has neither launcher, so these are dataclasses with the real field names and defaults of
the pinned releases, only the fields the plugins read or set:

- SGLang 0.5.23 ``ServerArgs`` (a msgspec Struct assembled from ``sglang/srt/arg_groups/fields/``):
  ``model_path`` (``model.py:51``, no default), ``trust_remote_code = False`` (``model.py:106``),
  ``revision = None`` (``model.py:122``), ``tp_size = 1`` (``parallel.py:45``) and, in ``exec_.py``,
  ``disable_custom_all_reduce = False`` (725), ``enable_torch_symm_mem = False`` (736),
  ``enable_flashinfer_allreduce_fusion = False`` (765),
  ``enforce_disable_flashinfer_allreduce_fusion = False`` (766),
  ``flashinfer_allreduce_fusion_backend = None`` (770-790).
- vLLM 0.33.0 ``EngineArgs`` (a dataclass, ``vllm/engine/arg_utils.py:488``):
  ``tensor_parallel_size = 1`` (548, ``ParallelConfig``), ``enforce_eager = False`` (648),
  ``disable_custom_all_reduce = False`` (649), ``optimization_level = O2`` (850),
  ``compilation_config`` (771, a fresh ``CompilationConfig`` whose ``pass_config`` is a
  ``PassConfig``, ``vllm/config/compilation.py:692``); ``PassConfig`` (``compilation.py:113-170``) has
  every fusion switch ``None`` ("decided by the optimisation level") except ``eliminate_noops = True``.

The real launchers run the same plugin code in tests/plugins/test_real_launchers.py
(scripts/launcher_parsers.sh).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from topo_gate.launchers.command.releases import NAMES
from topo_gate.launchers.knobs import PINNED


@dataclass
class StandInServerArgs:
    """Stand-in for SGLang 0.5.23 ``ServerArgs``: real field names and defaults (see the module doc)."""

    model_path: str
    tp_size: int = 1
    trust_remote_code: bool = False
    revision: str | None = None
    disable_custom_all_reduce: bool = False
    enable_torch_symm_mem: bool = False
    enable_flashinfer_allreduce_fusion: bool = False
    enforce_disable_flashinfer_allreduce_fusion: bool = False
    flashinfer_allreduce_fusion_backend: str | None = None


@dataclass
class StandInPassConfig:
    """Stand-in for vLLM 0.33.0 ``PassConfig`` (``vllm/config/compilation.py:113-170``)."""

    fuse_norm_quant: bool | None = None
    fuse_act_quant: bool | None = None
    fuse_attn_quant: bool | None = None
    eliminate_noops: bool = True
    fuse_allreduce_rms: bool | None = None
    enable_qk_norm_rope_fusion: bool | None = None
    fuse_rope_kvcache_cat_mla: bool | None = None
    fuse_act_padding: bool | None = None
    fuse_mla_dual_rms_norm: bool | None = None
    fuse_rope_kvcache: bool | None = None
    fuse_qk_norm_rope_kvcache: bool | None = None
    rope_kvcache_fusion_max_token_num: int = 256
    fi_allreduce_fusion_max_size_mb: float | None = None


@dataclass
class StandInCompilationConfig:
    """Stand-in for vLLM 0.33.0 ``CompilationConfig``: only its ``pass_config`` (compilation.py:692)."""

    pass_config: StandInPassConfig = field(default_factory=StandInPassConfig)


@dataclass
class StandInEngineArgs:
    """Stand-in for vLLM 0.33.0 ``EngineArgs``: real field names and defaults (see the module doc)."""

    model: str = "Qwen/Qwen3-0.6B"
    tensor_parallel_size: int = 1
    disable_custom_all_reduce: bool = False
    enforce_eager: bool = False
    optimization_level: int = 2  # an IntEnum in vLLM (OptimizationLevel.O2): str() is its digit
    compilation_config: StandInCompilationConfig = field(default_factory=StandInCompilationConfig)


def field_defaults(config: object) -> dict[str, object]:
    """A stand-in's fields and their defaults: what a plugin compares the parsed values with."""
    return {f.name: f.default for f in dataclasses.fields(config)}  # type: ignore[arg-type]


def release(launcher: str) -> str:
    """How a plugin's line names the release a plan modelled (the newest, for a plan made unasked)."""
    return f"{NAMES[launcher]} {PINNED[launcher]}"
