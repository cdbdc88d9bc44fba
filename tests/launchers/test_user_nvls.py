"""Which NCCL a launcher's default runs at TP > 2 on a multicast NVSwitch node is the user's NVLS
setting, read from the user's environment (it is no launcher knob, so the command line's own knobs
never carry it): NVLS off there makes the default's NCCL the measured one; left to NCCL, it is
``nccl_nvls``, which no trial times (``routes/nccl.py``, ``plan/flow.py``). SGLang writes NVLS off
itself unless the user set the variable."""

from __future__ import annotations

import pytest
from priced_profiles import FINGERPRINT, priced_profile, scaled, times

from topo_gate.launchers import PLANNERS, PlanRequest
from topo_gate.launchers.routes.nccl import MEASURED, NVLS, NVLS_ENV

NCCL = scaled(8.0, 0.05)
#: TP 4 on NVSwitch, SM 9.0: a node where NCCL would use NVLS.
PROFILE = priced_profile({"allreduce": {"nccl": NCCL}, "allreduce_rmsnorm": {"nccl": times(NCCL, 1.2)}}, tp=4)


def _nccl_run(launcher: str, user_env: dict[str, str] | None) -> set[str]:
    """The NCCL the launcher runs by default and with the plan: the plan's knobs go on top of the
    user's environment, whose NVLS setting they keep."""
    request = PlanRequest(PROFILE, tp=4, fingerprint=FINGERPRINT, model="llama-3-70b", user_env=user_env)
    plan = PLANNERS[launcher](request)
    assert plan.choice is not None, plan.reason
    return {side.nccl for variant in plan.choice.variants for side in (variant.default, variant.plan)}


@pytest.mark.parametrize(
    ("launcher", "user_env", "expected"),
    [
        ("vllm", {}, NVLS),
        ("vllm", {NVLS_ENV: "0"}, MEASURED),
        ("vllm", {NVLS_ENV: "1"}, NVLS),
        ("trtllm", {}, NVLS),
        ("trtllm", {NVLS_ENV: "0"}, MEASURED),
        ("sglang", {}, MEASURED),  # SGLang sets it to 0 itself
        ("sglang", {NVLS_ENV: "1"}, NVLS),  # the user's value stands
        ("sglang", {NVLS_ENV: "0"}, MEASURED),
    ],
)
def test_the_nccl_run_follows_the_users_nvls_setting(launcher, user_env, expected) -> None:
    assert _nccl_run(launcher, user_env) == {expected}


def test_without_a_given_environment_the_process_environment_is_the_users(monkeypatch) -> None:
    # The plugins and exec plan inside the launcher's own environment (user_env None: os.environ).
    monkeypatch.setenv(NVLS_ENV, "0")
    assert _nccl_run("vllm", None) == {MEASURED}
    monkeypatch.delenv(NVLS_ENV)
    assert _nccl_run("vllm", None) == {NVLS}
