"""The outlook's plan "with the fix" is the plan once the fix is taken, flags and env alike: SGLang's
untimed MNNVL fusion on SM 10.x is fixed by a flag (``--flashinfer-allreduce-fusion-backend
trtllm``), and the re-plan must run with it on the command line, as ``recommend`` does for a user
who passed it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from knob_cases import BY_NAME

from topo_gate.launchers.outlook import outlooks
from topo_gate.launchers.plan.unmeasured import setting_words, untimed

#: SGLang's fusion node of the knob cases, on SM 10.0: its fusion backend auto is MNNVL, never timed.
CASE = replace(BY_NAME["sglang-fusion-off"], sm="10.0")


@pytest.mark.slow  # plans SGLang three times over the knob case's ladder
def test_the_replan_with_a_flag_fix_runs_with_the_flag() -> None:
    profile = CASE.profile()
    (sglang,) = outlooks(profile, model=CASE.model, launchers=["sglang"]).entries
    fix = untimed("mnnvl_fused_sglang", "sglang")
    assert fix is not None and fix.args and not fix.env
    assert sglang.setting == setting_words(fix) == "--flashinfer-allreduce-fusion-backend trtllm"
    assert "mnnvl_fused_sglang" in sglang.outcome.estimate  # untimed today
    taken = CASE.plan(profile, user_args=fix.args)
    assert sglang.with_setting is not None
    assert sglang.with_setting.estimate == taken.estimate
    # With the flag the default is timed: a price per step, no longer "not measured".
    assert "us of all-reduce per step" in sglang.with_setting.estimate
    assert sglang.with_setting.estimate != CASE.plan(profile).estimate
