"""What each flag a plan may emit, or a plugin reads back as the user's, sets in the launcher's own
configuration object.

A plugin runs after the command line was parsed, so it applies a plan's flags as the fields they set,
and reads the user's own all-reduce flags back from the fields that differ from their defaults (vLLM's
``--enforce-eager`` and ``--optimization-level`` are never emitted, but the route model reads both:
no fusion pass without compilation, none by default below ``-O2``).
Written from the pinned releases' flag definitions and checked against their real parsers by
scripts/launcher_parsers.py: SGLang 0.5.23 ``sglang/srt/arg_groups/fields/exec_.py:725-775``
(``ServerArgs`` fields); vLLM 0.33.0 ``vllm/engine/arg_utils.py:649`` (``EngineArgs``), and
``--compilation-config``, whose ``pass_config`` keys are ``PassConfig`` fields
(``vllm/config/compilation.py:114-162``). A value of ``None`` means "the flag's own argument".
"""

from __future__ import annotations

from typing import Any

FLAG_FIELDS: dict[str, dict[str, tuple[str, Any]]] = {
    "sglang": {
        "--disable-custom-all-reduce": ("disable_custom_all_reduce", True),
        "--enforce-disable-flashinfer-allreduce-fusion": (
            "enforce_disable_flashinfer_allreduce_fusion",
            True,
        ),
        "--enable-torch-symm-mem": ("enable_torch_symm_mem", True),
        "--flashinfer-allreduce-fusion-backend": ("flashinfer_allreduce_fusion_backend", None),
    },
    "vllm": {
        "--disable-custom-all-reduce": ("disable_custom_all_reduce", True),
        "--enforce-eager": ("enforce_eager", True),  # arg_utils.py:648
        "--optimization-level": (
            "optimization_level",
            None,
        ),  # arg_utils.py:850, an IntEnum: str() is its digit
    },
}
#: vLLM's flag whose JSON value is merged key by key into ``EngineArgs.compilation_config.pass_config``.
VLLM_COMPILATION_FLAG = "--compilation-config"
