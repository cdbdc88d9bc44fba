"""The arms' commands, as ``topo-gate exec`` would build them (topo_gate/ab/arms.py)."""

from __future__ import annotations

import os

import pytest
from ab_helpers import FINGERPRINT

from topo_gate.ab.arms import build_arms, remove_temp_dirs
from topo_gate.launchers import plan_without_profile
from topo_gate.profile.reader import FINGERPRINT_ENV

CMD = ("python", "-m", "sglang.benchmark.one_batch", "--model-path", "M", "--tp-size", "2")
ENV = {"PATH": "/usr/bin", "TOPO_GATE_PROFILE": "node.yaml", "TOPO_GATE_PLUGIN_APPLIED": "x"}


def test_default_is_the_command_as_given_and_plan_and_nccl_add_their_knobs(sglang_node) -> None:
    plan = sglang_node.planned()
    default, with_plan, forced = build_arms(
        ["default", "plan", "nccl"], CMD, ENV, launcher="sglang", plan=plan, fingerprint=FINGERPRINT
    )
    assert (default.argv, dict(default.env)) == (CMD, {"PATH": "/usr/bin"})
    assert with_plan.argv[: len(CMD)] == CMD and set(plan.args) <= set(with_plan.argv)
    assert {k: with_plan.env[k] for k in plan.env} == dict(plan.env)
    assert with_plan.env[FINGERPRINT_ENV] == FINGERPRINT  # as exec exports it for a launcher-side gate()
    assert all(name not in arm.env for arm in (default, with_plan, forced) for name in ENV if name != "PATH")
    nccl = plan_without_profile("sglang", "test")
    assert {k: forced.env[k] for k in nccl.env} == dict(nccl.env) and FINGERPRINT_ENV not in forced.env
    assert [arm.same_as for arm in (default, with_plan, forced)] == [None, None, None]


def test_an_arm_that_adds_nothing_is_the_same_as_the_default(sglang_node) -> None:
    plan = sglang_node.planned()
    env = {**ENV, **plan.env}
    _, with_plan = build_arms(
        ["default", "plan"], (*CMD, *plan.args), env, launcher="sglang", plan=plan, fingerprint=FINGERPRINT
    )
    assert with_plan.same_as == "default" and with_plan.knobs["same_as"] == "default"


@pytest.mark.usefixtures("trtllm_user_env")
@pytest.mark.parametrize(
    "name, nccl_same_as",
    [("trtllm-twoshot", None), ("trtllm-nccl", "plan")],  # "plan": two files, one content, one command
)
def test_options_files_are_compared_by_content_and_removed(priced, name, nccl_same_as) -> None:
    cmd = ("trtllm-bench", "--model", "M", "throughput", "--tp", "2")
    plan = priced(name).planned(cmd)
    arms = build_arms(
        ["default", "plan", "nccl"], cmd, ENV, launcher="trtllm", plan=plan, fingerprint=FINGERPRINT
    )
    _, with_plan, forced = arms
    folders = [folder for arm in arms for folder in arm.temp_dirs]
    assert len(folders) == 2 and all(os.path.isdir(folder) for folder in folders)
    assert forced.same_as == nccl_same_as
    remove_temp_dirs(arms)
    assert not any(os.path.exists(folder) for folder in folders)
    assert with_plan.same_as is None


def test_a_command_the_plan_cannot_merge_into_is_refused_and_leaves_no_file(vllm_node) -> None:
    plan = vllm_node.planned()
    assert "--compilation-config" in plan.args  # the plan's config is merged into the user's
    with pytest.raises(ValueError):
        build_arms(
            ["default", "plan"],
            ("vllm", "bench", "latency", "-tp", "2", "--compilation-config", "{not json"),
            ENV,
            launcher="vllm",
            plan=plan,
            fingerprint=FINGERPRINT,
        )
