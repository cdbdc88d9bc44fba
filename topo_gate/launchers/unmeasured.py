"""Why a launcher's default path is not timed, and the one action that makes it timed. Pure.

A plan never replaces a default path that was not measured (DESIGN.md, principle 1), so where a
launcher's default is such a path the honest plan is "no knobs". One table of causes serves the
probe's preflight (before any trial: will this run time it?) and ``recommend --explain`` (after:
why does the profile have no price for it?), so both say the same thing.
"""

from __future__ import annotations

from topo_gate.launchers import knobs

SGLANG_INSTALL = (
    'pip install "sglang==0.5.23", or python scripts/sglang_v2_bundle.py build and '
    "TOPO_GATE_SGLANG_BUNDLE=$PWD/build/sglang-v2 (README, Quickstart)"
)
TRIALS_INSTALL = 'pip install ".[trials]"'
#: Up-front reasons (``probe.installed``) -> what fixes them, by the backend they refuse.
INSTALL_ACTIONS = (("custom_v2_sglang", SGLANG_INSTALL), ("", TRIALS_INSTALL))

_MULTICAST = "needs NVLink multicast: topo-gate never creates it on a shared node"
#: Default paths no trial times: (part of the route's name, launcher or "" for any) -> (why, action).
#: The actions were checked on the route models: each turns the sizes into a timed path.
UNTIMED: tuple[tuple[str, str, str, str | None], ...] = (
    (
        "autotuned",
        "trtllm",
        "TensorRT-LLM's AUTO asks its AutoTuner at warm-up: the pick is known only at run time",
        "TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1 in TensorRT-LLM's env: AUTO then follows its table, whose "
        "kernels (trtllm_oneshot, trtllm_fused_oneshot) are timed",
    ),
    (
        "mnnvl",
        "vllm",
        f"vLLM's FlashInfer backend auto is MNNVL on one node, which {_MULTICAST}",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm in vLLM's env: its default is then FlashInfer's TRT-LLM "
        "kernels (trtllm_*_vllm), which are timed",
    ),
    (
        "mnnvl",
        "sglang",
        f"SGLang's fusion backend auto is MNNVL on SM 10.x, which {_MULTICAST}",
        "--flashinfer-allreduce-fusion-backend trtllm: FlashInfer's TRT-LLM kernels, which are timed",
    ),
    (
        "multicast_sglang",
        "sglang",
        f"custom all-reduce v2 takes these sizes through multicast, which {_MULTICAST}",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 in SGLang's env: v2 then takes these sizes without multicast "
        "(custom_v2_sglang), which is timed",
    ),
    ("multimem", "", f"torch symmetric memory's multimem all-reduce {_MULTICAST}", None),
    ("multicast", "", f"this path {_MULTICAST}", None),
    (
        "nccl_nvls",
        "",
        "NCCL with NVLink SHARP (multicast, TP > 2 on NVSwitch); the trials time NCCL with NVLS off",
        "NCCL_NVLS_ENABLE=0 in the launcher's env: its NCCL is then the one timed",
    ),
    ("graph_only", "", "CUDA-graph and eager calls of these sizes take different paths", None),
    ("eager_only", "", "CUDA-graph and eager calls of these sizes take different paths", None),
    ("model_collectives", "", "the model runs collectives of its own here, not the all-reduce path", None),
    ("model_dependent", "", "the path depends on the served architecture", "--model NAME"),
)
RELEASE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}
#: What a profile without a trial of SGLang's custom all-reduce v2 lacks (the probe times it only
#: where the pinned release's kernels are importable), and the two ways to a plan.
V2_NOT_TIMED = "this profile has no trial of SGLang's custom all-reduce v2 (its kernels were not importable)"
V2_ACTION = f"re-probe with {SGLANG_INSTALL}, or plan against SGLang's legacy kernel with SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0"


def untimed(path: str, launcher: str) -> tuple[str, str | None] | None:
    """(why no trial times ``path``, the action that makes it timed or None) from ``UNTIMED``;
    None for a path the table does not know."""
    for part, only, why, action in UNTIMED:
        if part in path and only in ("", launcher):
            return why, action
    return None


def unmeasured_words(name: str, launcher: str) -> tuple[str, str, str] | None:
    """(what the launcher runs, why the profile has no price for it, the action) for a default path
    ``name`` of a measurement table; None for a path with no known cause."""
    version = knobs.PINNED.get(launcher, "")
    runs = f"{RELEASE_NAMES.get(launcher, launcher)} {version} runs {name} here by default"
    if name.startswith("custom_v2_sglang"):
        return runs, V2_NOT_TIMED, V2_ACTION
    found = untimed(name, launcher)
    if found is None or found[1] is None:
        return None
    return runs, found[0], found[1]
