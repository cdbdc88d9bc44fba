"""TensorRT-LLM's ONESHOT unlock line keeps its word on a profile built as a probe builds it: the
measurement it names, added at 0.99x its limit, plans ``allreduce_strategy: ONESHOT``; at 1.01x it
does not (``test_unlock_lines`` holds the planner's own rules to the same)."""

from __future__ import annotations

import pytest
from added_measurements import after_largest_only, in_context_times, with_transition
from knob_cases import BY_NAME
from priced_profiles import priced_evidence

SIDES = ((0.99, True), (1.01, False))

ONESHOT_KERNELS = ("trtllm_oneshot", "trtllm_fused_oneshot", "trtllm_twoshot", "trtllm_fused_twoshot")


#: Served models whose messages are sizes of the profile's ladder (hidden 7168): the measurement a
#: line names is then one a profile can hold (a probe with another model's shape ladders its own).
@pytest.mark.parametrize("model", ["deepseek-v3"])
def test_trtllm_oneshot_line_keeps_its_word_where_context_favours_it(model: str) -> None:
    """The ``trtllm-oneshot`` node (TP4, one-shot 0.5x NCCL) with its one-shot kernels timed in layer
    graphs at half their isolated cost there, and every transition timed only after the largest size
    (300 us): the line's limit is the isolated screen's, which the plan goes through first."""
    case = BY_NAME["trtllm-oneshot"]
    evidence = priced_evidence(
        case.tables, transitions=dict.fromkeys(ONESHOT_KERNELS, 300.0), context=True, **case._options()
    )
    profile = in_context_times(evidence, "trtllm_oneshot", 0.5)
    for kernel in ONESHOT_KERNELS:
        profile = after_largest_only(profile, kernel)
    today = case.plan(profile, model=model)
    assert today.config == {}
    assert today.choice is not None
    found = today.choice.unlock
    assert found is not None
    assert found.candidate.knobs.config == {"allreduce_strategy": "ONESHOT"}
    for factor, plans in SIDES:
        again = case.plan(
            with_transition(profile, found.kernel, found.largest_prior, factor * found.threshold_us),
            model=model,
        )
        assert (again.config == {"allreduce_strategy": "ONESHOT"}) is plans, factor
