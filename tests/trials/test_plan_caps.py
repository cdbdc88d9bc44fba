"""The trial ladder and the transition priors hold each launcher's Lamport buffer cap at the probed
hidden size (``launchers.routes.buffer_caps`` -> ``plan.make_sessions(buffer_caps=)``), plus one mid
size, so a planner charges a route the transition after what its buffer really holds -- measured at
every decode rung (1-256 tokens; 1-512 at TP >= 4).

Built for the served hidden size 7168 (DeepSeek-V3, Kimi K2), bf16, SM 9.0, at TP2 and TP4.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from topo_gate.launchers.routes.buffer_caps import buffer_caps
from topo_gate.probe.budget import fit_to_budget
from topo_gate.trials.plan import MID_PRIOR_TOKENS, make_sessions, token_ladder, with_tokens

#: (buffer, tokens) at hidden 7168, bf16, SM 9.0: the numbers docs/trials.md tabulates.
CAPS = {
    2: {
        ("SGLang custom all-reduce v2", 1170),  # 16 MiB // 14336 B
        ("SGLang FlashInfer workspace", 2048),
        ("vLLM fused one-shot", 2340),  # 32 MB
        ("vLLM fused all-reduce + RMSNorm", 4681),  # 64 MB
        ("TensorRT-LLM routing limit", 4681),  # 64 MiB
    },
    4: {
        ("vLLM fused all-reduce + RMSNorm", 146),  # 2 MB
        ("vLLM fused one-shot", 146),
        ("SGLang custom all-reduce v2", 1170),
        ("SGLang FlashInfer workspace", 2048),
        ("TensorRT-LLM routing limit", 4681),
    },
}
DECODE_RUNGS = {2: (1, 2, 4, 8, 16, 32, 64, 128, 256), 4: (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)}


@dataclass(frozen=True)
class _Group:
    gpus: tuple[int, ...]
    group_class: str = "nvswitch"


class _Node:
    def tp_groups(self, tp: int) -> list[_Group]:
        return [_Group(tuple(range(tp)))]

    def tp_unavailable(self, tp: int) -> str | None:
        return None


def _plans(tp: int, max_tokens: int = 8192):
    caps = tuple(cap.tokens for cap in buffer_caps(tp=tp, capability=(9, 0), hidden=7168, itemsize=2))
    sessions, _ = make_sessions(
        _Node(), [tp], patterns=("allreduce", "allreduce_rmsnorm"), device="cuda", dtype="bfloat16",
        hidden=7168, max_tokens=max_tokens, graph_calls=32, rounds=15, warmup=3, buffer_caps={tp: caps},
    )  # fmt: skip
    return sessions, sessions[0].plans


@pytest.mark.parametrize("tp", [2, 4])
def test_the_caps_are_the_pinned_launchers_limits(tp: int) -> None:
    found = {
        (cap.buffer, cap.tokens) for cap in buffer_caps(tp=tp, capability=(9, 0), hidden=7168, itemsize=2)
    }
    assert found == CAPS[tp]
    assert all(cap.source for cap in buffer_caps(tp=tp, capability=(9, 0), hidden=7168, itemsize=2))


@pytest.mark.parametrize("tp", [2, 4])
def test_the_ladder_and_the_transition_priors_hold_every_cap_and_the_mid_size(tp: int) -> None:
    _, plans = _plans(tp)
    caps = {tokens for _, tokens in CAPS[tp]}
    for plan in plans:
        assert set(plan.tokens) == set(token_ladder(8192)) | caps
        assert set(plan.buffer_caps) == caps
        assert caps | {MID_PRIOR_TOKENS, 8192} <= set(plan.after_tokens)
        # The power-of-two grid stays: every other size down from the largest.
        assert {2, 8, 32, 128, 512, 2048} <= set(plan.after_tokens)


@pytest.mark.parametrize("tp", [2, 4])
def test_every_decode_rung_is_a_ladder_size_below_every_cap_prior(tp: int) -> None:
    _, plans = _plans(tp)
    for plan in plans:
        assert set(DECODE_RUNGS[tp]) <= set(plan.tokens)
        for prior in plan.after_tokens:
            # The worker times a prior's replays at every smaller ladder size the path is routed at.
            assert [t for t in plan.tokens if t < prior and t in DECODE_RUNGS[tp]] == [
                rung for rung in DECODE_RUNGS[tp] if rung < prior
            ]


def test_a_cap_above_max_tokens_is_left_out() -> None:
    _, plans = _plans(2, max_tokens=2048)
    assert plans[0].buffer_caps == (1170, 2048)
    assert 2340 not in plans[0].tokens and 4681 not in plans[0].tokens


def test_a_shorter_ladder_keeps_the_caps_it_still_holds() -> None:
    _, plans = _plans(2)
    shorter = with_tokens(plans[0], [t for t in plans[0].tokens if t <= 2048])
    assert shorter.buffer_caps == (1170, 2048)
    assert {1170, 2048, MID_PRIOR_TOKENS} <= set(shorter.after_tokens) and max(shorter.after_tokens) == 2048


def test_without_caps_the_plan_is_the_power_of_two_grid() -> None:
    sessions, _ = make_sessions(
        _Node(), [2], patterns=("allreduce",), device="cuda", dtype="bfloat16", hidden=7168, max_tokens=8192,
        graph_calls=32, rounds=15, warmup=3,
    )  # fmt: skip
    plan = sessions[0].plans[0]
    assert plan.tokens == token_ladder(8192) and plan.buffer_caps == ()
    assert plan.after_tokens == (2, 8, 32, 128, 512, 2048, 8192)


def test_the_budget_drops_the_cap_priors_with_the_finer_grid() -> None:
    sessions, _ = _plans(2)
    fitted, dropped = fit_to_budget(sessions, 60.0, "cuda")
    assert all(plan.after_tokens == (plan.tokens[-1],) for s in fitted for plan in s.plans)
    assert any(item.what == "size transitions after sizes below the largest" for item in dropped)


def test_a_cap_that_is_not_a_ladder_size_is_refused() -> None:
    _, plans = _plans(2)
    with pytest.raises(ValueError, match="buffer_caps"):
        type(plans[0])(**{**plans[0].__dict__, "buffer_caps": (1171,), "after_tokens": (8192,)})
