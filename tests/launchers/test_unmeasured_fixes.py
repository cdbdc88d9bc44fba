"""Per launcher, each untimed default path has its cause, and the fix it names is the one that launcher
reads: taken on the launcher's route model, the path is gone and what runs instead is timed
(``plan/unmeasured.py``). SGLang's custom all-reduce v2 gets multicast from torch symmetric memory
(sglang 0.5.23 ``srt/distributed/device_communicators/custom_all_reduce_v2.py:304-305``: v2 takes
its multicast plane only where ``symm_mem.multicast_ptr`` is non-zero), which torch leaves at 0
under ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` (``routes/torch_symm.py``): that is the variable its fix
must name, not one of SGLang's own."""

from __future__ import annotations

import pytest

from topo_gate.launchers import knobs
from topo_gate.launchers.plan.unmeasured import (
    NO_FIX,
    UNTIMED,
    V2_LEGACY,
    cause,
    release,
    unmeasured_words,
    untimed,
)
from topo_gate.launchers.routes import Context, Knobs, route
from topo_gate.launchers.routes.nccl import MEASURED, NVLS, NVLS_ENV, nccl_path
from topo_gate.launchers.routes.torch_symm import DISABLE_MULTICAST_ENV


def h200_tp2(hidden: int, model: str) -> Context:
    return Context(tp=2, capability=(9, 0), group_class="nvswitch", hidden=hidden, model=model)


#: Per launcher, an untimed default path, a node and model where the launcher runs it by default.
CASES = {
    "trtllm autotuned": ("trtllm", "trtllm_autotuned", h200_tp2(7168, "deepseek-v3")),
    "vllm mnnvl": ("vllm", "mnnvl_vllm", h200_tp2(8192, "llama-3-70b")),
    "sglang mnnvl on sm 10": (
        "sglang",
        "mnnvl_fused_sglang",
        Context(tp=2, capability=(10, 0), group_class="nvswitch", hidden=7168, model="deepseek-v3"),
    ),
    "sglang v2 multicast at tp 4": (
        "sglang",
        "custom_v2_multicast_sglang",
        Context(tp=4, capability=(9, 0), group_class="nvswitch", hidden=8192, model="llama-3-70b"),
    ),
    "sglang v2 untimed": (
        "sglang",
        "custom_v2_sglang",
        h200_tp2(8192, "llama-3-70b"),
    ),
}


def _paths(launcher: str, knobset: Knobs, ctx: Context) -> set[str]:
    return {backend for spans in route(launcher, knobset, ctx).values() for _, backend in spans if backend}


@pytest.mark.parametrize("case", list(CASES))
def test_the_fix_takes_the_default_off_its_untimed_path(case: str) -> None:
    launcher, path, ctx = CASES[case]
    assert path in _paths(launcher, Knobs(), ctx)
    found = cause(path, launcher)
    assert found is not None and (found.args or found.env), path
    runs, why, advice = unmeasured_words(path, launcher) or ("", "", "")
    assert runs == f"{release(launcher)} runs {path} here by default" and why == found.why
    assert advice.startswith(found.action or "-")
    fixed = _paths(launcher, Knobs(found.args, dict(found.env)), ctx)
    assert path not in fixed
    # What runs instead is a path a trial times: no cause of its own (v2 is timed where importable).
    assert all(untimed(name, launcher) is None for name in fixed), fixed


def test_each_launcher_names_its_own_release() -> None:
    for launcher, words in (("sglang", "SGLang"), ("vllm", "vLLM"), ("trtllm", "TensorRT-LLM")):
        assert release(launcher) == f"{words} {knobs.PINNED[launcher]}"


def test_sglangs_multicast_fix_is_the_variable_torch_reads_inside_sglang() -> None:
    found = untimed("custom_v2_multicast_sglang", "sglang")
    assert found is not None and found.env == ((DISABLE_MULTICAST_ENV, "1"),) and not found.args
    assert cause("custom_v2_sglang", "sglang") is V2_LEGACY


@pytest.mark.parametrize("launcher", ["vllm", "trtllm"])
def test_nvls_is_fixed_by_turning_it_off_in_the_launchers_env(launcher: str) -> None:
    ctx = Context(tp=4, capability=(9, 0), group_class="nvswitch", hidden=8192)
    assert nccl_path(launcher, Knobs(), ctx) == NVLS
    found = cause(NVLS, launcher)
    assert found is not None and found.env == ((NVLS_ENV, "0"),)
    assert nccl_path(launcher, Knobs(found.args, dict(found.env)), ctx) == MEASURED


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("model_private_vllm", "an all-reduce kernel of its own"),
        ("mixed_sites_vllm", "calls the fused kernel itself at some norm sites"),
    ],
)
def test_vllms_model_kernels_have_a_cause_and_no_setting_to_fix(path: str, words: str) -> None:
    found = untimed(path, "vllm")
    assert found is not None and words in found.why
    assert found.action is None and not found.args and not found.env
    assert untimed(path, "sglang") is None


#: Default paths whose cause no setting removes, one per such entry of ``UNTIMED``, with its launcher.
NO_FIX_PATHS = {
    "multimem": ("symm_mem_multimem", "vllm"),
    "multicast": ("nvls_multicast", "sglang"),
    "graph_only": ("custom_graph_only", "vllm"),
    "eager_only": ("custom_eager_only", "vllm"),
    "model_collectives": ("model_collectives", "sglang"),
    "model_private": ("model_private_vllm", "vllm"),
    "mixed_sites": ("mixed_sites_vllm", "vllm"),
}


def test_every_cause_without_a_fix_is_in_the_cases_below() -> None:
    assert {entry.part for entry in UNTIMED if entry.action is None} == set(NO_FIX_PATHS)


@pytest.mark.parametrize("part", list(NO_FIX_PATHS))
def test_a_cause_no_setting_removes_says_so_and_sends_no_one_to_re_probe(part: str) -> None:
    path, launcher = NO_FIX_PATHS[part]
    found = cause(path, launcher)
    assert found is not None and found.part == part and found.action is None
    runs, why, advice = unmeasured_words(path, launcher) or ("", "", "")
    assert runs == f"{release(launcher)} runs {path} here by default" and why == found.why
    # A re-probe times nothing more here: the advice says no action makes it timed.
    assert advice == NO_FIX and "re-probe this node" not in advice


def test_an_action_that_is_no_launcher_setting_is_the_advice_alone() -> None:
    # "--model NAME" names the served model, not a launcher setting to measure against the default:
    # no A/B command follows it.
    found = untimed("model_dependent", "")
    assert found is not None and found.args == () and found.env == ()
    assert found.advice == "--model NAME"


@pytest.mark.parametrize("launcher", [*knobs.LAUNCHERS, "".join(["sg", "lang"])])
def test_only_sglang_has_the_v2_legacy_cause(launcher: str) -> None:
    # The last name is built at run time, a string equal to "sglang" but not the same object.
    found = cause("custom_v2_sglang", launcher)
    if launcher == "sglang":
        assert found is V2_LEGACY
    else:
        assert found is untimed("custom_v2_sglang", launcher) is None
