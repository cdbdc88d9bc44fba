"""Why a launcher's default path is not timed, and the one action that makes it timed. Pure.

A plan never replaces a default path that was not measured (DESIGN.md, principle 1), so where a
launcher's default is such a path the honest plan is "no knobs". One table of causes serves the
probe's preflight (before any trial: will this run time it?) and ``recommend --explain`` (after:
why does the profile have no price for it?), so both say the same thing.
"""

from __future__ import annotations

from typing import NamedTuple

from topo_gate.launchers import knobs

SGLANG_INSTALL = (
    'pip install "sglang==0.5.23", or python scripts/sglang_v2_bundle.py build and '
    "TOPO_GATE_SGLANG_BUNDLE=$PWD/build/sglang-v2 (README, Quickstart)"
)
TRIALS_INSTALL = 'pip install ".[trials]"'
#: Up-front reasons (``probe.installed``) -> what fixes them, by the backend they refuse.
INSTALL_ACTIONS = (("custom_v2_sglang", SGLANG_INSTALL), ("", TRIALS_INSTALL))

_MULTICAST = "needs NVLink multicast: topo-gate never creates it on a shared node"


class Untimed(NamedTuple):
    """A default path no trial times: the part of its route name that marks it, the launcher it
    concerns ("" for any), why no trial times it, the action that makes the sizes timed (None: none
    does), and that action as launcher settings (args, env) when it is one, which ``outlook`` plans
    with to say what the plan becomes once it is taken."""

    part: str
    launcher: str
    why: str
    action: str | None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def advice(self) -> str | None:
        """``action``, and where it changes the launcher's own settings, that the change is itself
        not measured against the untimed default it replaces, with the command that measures it."""
        if self.action is None or not (self.args or self.env):
            return self.action
        return f"{self.action}. {unmeasured_change(self)}"


#: The actions were checked on the route models: each turns the sizes into a timed path.
UNTIMED: tuple[Untimed, ...] = (
    Untimed(
        "autotuned",
        "trtllm",
        "TensorRT-LLM's AUTO asks its AutoTuner at warm-up, which times NCCL_SYMMETRIC, NCCL, one-shot "
        "and two-shot per token bucket and keeps the fastest: the pick is known only at run time, and "
        "is likely no slower than the table's, which turning the tuner off follows",
        "TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1 in TensorRT-LLM's env: AUTO then follows its table, whose "
        "kernels (trtllm_oneshot, trtllm_fused_oneshot) are timed",
        env=(("TLLM_DISABLE_ALLREDUCE_AUTOTUNE", "1"),),
    ),
    Untimed(
        "mnnvl",
        "vllm",
        f"vLLM's FlashInfer backend auto is MNNVL on one node, which {_MULTICAST}",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm in vLLM's env: its default is then FlashInfer's TRT-LLM "
        "kernels (trtllm_*_vllm), which are timed",
        env=(("VLLM_FLASHINFER_ALLREDUCE_BACKEND", "trtllm"),),
    ),
    Untimed(
        "mnnvl",
        "sglang",
        f"SGLang's fusion backend auto is MNNVL on SM 10.x, which {_MULTICAST}",
        "--flashinfer-allreduce-fusion-backend trtllm: FlashInfer's TRT-LLM kernels, which are timed",
        args=("--flashinfer-allreduce-fusion-backend", "trtllm"),
    ),
    Untimed(
        "multicast_sglang",
        "sglang",
        f"custom all-reduce v2 takes these sizes through multicast, which {_MULTICAST}",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 in SGLang's env: v2 then takes these sizes without multicast "
        "(custom_v2_sglang), which is timed",
        env=(("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),),
    ),
    Untimed("multimem", "", f"torch symmetric memory's multimem all-reduce {_MULTICAST}", None),
    Untimed("multicast", "", f"this path {_MULTICAST}", None),
    Untimed(
        "nccl_nvls",
        "",
        "NCCL with NVLink SHARP (multicast, TP > 2 on NVSwitch); the trials time NCCL with NVLS off",
        "NCCL_NVLS_ENABLE=0 in the launcher's env: its NCCL is then the one timed",
        env=(("NCCL_NVLS_ENABLE", "0"),),
    ),
    Untimed("graph_only", "", "CUDA-graph and eager calls of these sizes take different paths", None),
    Untimed("eager_only", "", "CUDA-graph and eager calls of these sizes take different paths", None),
    Untimed(
        "model_collectives", "", "the model runs collectives of its own here, not the all-reduce path", None
    ),
    Untimed("model_dependent", "", "the path depends on the served architecture", "--model NAME"),
    Untimed(
        "model_private",
        "vllm",
        "the served model runs an all-reduce kernel of its own for these batches (vLLM 0.34.0: MiniMax-M3, "
        f"MuseSpark), which {_MULTICAST}",
        None,
    ),
    Untimed(
        "mixed_sites",
        "vllm",
        "the served model (Kimi-K3) calls the fused kernel itself at some norm sites and leaves the others "
        "to the compilation pass or the plain all-reduce: where the two differ, a step runs both paths",
        None,
    ),
)
RELEASE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}
#: What a profile without a trial of SGLang's custom all-reduce v2 lacks (the probe times it only
#: where the pinned release's kernels are importable), and the two ways to a plan.
V2_NOT_TIMED = "this profile has no trial of SGLang's custom all-reduce v2 (its kernels were not importable)"
V2_ACTION = f"re-probe with {SGLANG_INSTALL}, or plan against SGLang's legacy kernel with SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0"
V2_LEGACY = Untimed(
    "custom_v2_sglang", "sglang", V2_NOT_TIMED, V2_ACTION, env=(("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", "0"),)
)


def untimed(path: str, launcher: str) -> Untimed | None:
    """The ``UNTIMED`` entry for the default path ``path`` of ``launcher``; None for a path the table
    does not know."""
    for entry in UNTIMED:
        if entry.part in path and entry.launcher in ("", launcher):
            return entry
    return None


def cause(name: str, launcher: str) -> Untimed | None:
    """Why a profile has no price for the default path ``name`` and what gives one: ``untimed``,
    and SGLang's custom all-reduce v2, which is timed only where its kernels were importable."""
    if name.startswith("custom_v2_sglang") and launcher == "sglang":
        return V2_LEGACY
    return untimed(name, launcher)


#: The advice for a known cause that no action removes (multicast, graph-only paths, a model's own
#: kernels): a re-probe would time nothing more, so saying "re-probe" would send the user in a circle.
NO_FIX = "none: no launcher setting and no re-probe makes this path one a trial times; these sizes stay on the launcher's default"


def unmeasured_words(name: str, launcher: str) -> tuple[str, str, str] | None:
    """(what the launcher runs, why the profile has no price for it, the advice) for a default path
    ``name`` of a measurement table; None for a path with no known cause."""
    found = cause(name, launcher)
    if found is None:
        return None
    return f"{release(launcher)} runs {name} here by default", found.why, found.advice or NO_FIX


def setting_words(found: Untimed) -> str:
    """The launcher settings of ``found``'s action as a user writes them (flags, then ``KEY=VALUE``)."""
    return " ".join([*found.args, *(f"{key}={value}" for key, value in found.env)])


#: The arm's name in the command below: what the user's own change is, beside ``default``.
AB_ARM_NAME = "fix"


def ab_command(found: Untimed) -> str:
    """The one command that times the launcher with ``found``'s env change against its default end to
    end (interleaved rounds, paired CI and a verdict): an env arm beside ``default``."""
    arms = " ".join(f"--arm {AB_ARM_NAME}:{key}={value}" for key, value in found.env)
    return f"topo-gate ab --profile P {arms} -- CMD"


def unmeasured_change(found: Untimed) -> str:
    """Why a fix that changes the launcher's settings is advice no trial backs, and what measures it."""
    said = "This change is itself not measured against the default it replaces"
    if found.args:
        return f"{said} (no trial times that default): run CMD with and without {setting_words(found)} under `topo-gate ab` to measure it end to end"
    return f"{said} (no trial times that default): `{ab_command(found)}` measures both end to end"


def release(launcher: str) -> str:
    """The launcher's pinned release in its own name: ``vLLM 0.33.0``."""
    return f"{RELEASE_NAMES.get(launcher, launcher)} {knobs.PINNED.get(launcher, '')}".rstrip()
