"""Why a launcher's default path has no price in a profile, and the one action that gives it one. Pure.

A plan never replaces a default path that was not measured (DESIGN.md, principle 1), so where a
launcher's default is such a path the honest plan is "no knobs". These are the words a user needs
then: what the launcher runs there by default, why topo-gate did not time it, and what to do.
"""

from __future__ import annotations

from topo_gate.launchers import knobs

RELEASE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}
#: (prefix of the measurement-table name, launcher, what it is, why it was not timed, the action).
_CAUSES = (
    (
        "custom_v2_sglang",
        "sglang",
        "SGLang's JIT custom all-reduce v2",
        "this profile has no trial of it (the probe times it only where the pinned SGLang release's "
        "kernels are importable)",
        "re-probe with `pip install 'sglang=={version}'` beside topo-gate (or the bundle from "
        "scripts/sglang_v2_bundle.py), or plan against SGLang's legacy kernel with "
        "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0",
    ),
    (
        "mnnvl",
        "vllm",
        "FlashInfer MNNVL (its standalone all-reduce backend `auto`)",
        "it needs NVLink multicast objects, which topo-gate never creates",
        "set VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm (a measured path) in the launcher's env",
    ),
    (
        "trtllm_autotuned",
        "trtllm",
        "its AUTO strategy with the runtime autotuner",
        "an autotuned choice is made at run time, not by a table a trial can replay",
        "set TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1 (AUTO then follows its lookup table, which is priced)",
    ),
    (
        "nccl_nvls",
        "",
        "NCCL with NVLink SHARP (NVLS)",
        "it needs NVLink multicast objects, which topo-gate never creates",
        "set NCCL_NVLS_ENABLE=0 in the launcher's env (the NCCL the probe timed)",
    ),
)


def unmeasured_words(name: str, launcher: str) -> tuple[str, str, str] | None:
    """(what the launcher runs, why it has no price, the action) for a default path ``name`` of a
    measurement table that the profile does not price; None for a path with no known cause."""
    base = name.removesuffix("+rmsnorm")
    for prefix, owner, what, why, action in _CAUSES:
        if base.startswith(prefix) and owner in ("", launcher):
            version = knobs.PINNED.get(launcher, "")
            release = f"{RELEASE_NAMES.get(launcher, launcher)} {version}".strip()
            return f"{release} runs {what} here by default", why, action.format(version=version)
    return None
