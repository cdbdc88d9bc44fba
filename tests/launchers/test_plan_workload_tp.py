"""The planner prices the ``serving`` workload the launchers run at the plan's TP size: decode
batches to 256 below TP 4 and to 512 from TP 4 (``plan/workload.py``, ``WIDE_DECODE_TP``), whether
the workload is named or left to the default."""

from __future__ import annotations

import pytest
from priced_profiles import FINGERPRINT, priced_profile, scaled, times

from topo_gate.launchers import PLANNERS, PlanRequest
from topo_gate.launchers.plan.workload import PRESETS, WIDE_SERVING


@pytest.mark.parametrize("workload", [None, "serving"])
@pytest.mark.parametrize(("tp", "expected"), [(2, PRESETS["serving"]), (4, WIDE_SERVING)])
def test_the_plan_prices_the_serving_mix_of_its_tp_size(tp: int, expected, workload: str | None) -> None:
    nccl = scaled(8.0, 0.05)
    profile = priced_profile(
        {"allreduce": {"nccl": nccl}, "allreduce_rmsnorm": {"nccl": times(nccl, 1.2)}}, tp=tp
    )
    for launcher, planner in PLANNERS.items():
        plan = planner(
            PlanRequest(
                profile,
                tp=tp,
                fingerprint=FINGERPRINT,
                model="llama-3-70b",
                workload=workload,
            )
        )
        assert not plan.fallback, (launcher, plan.reason)
        assert plan.workload == expected, launcher
