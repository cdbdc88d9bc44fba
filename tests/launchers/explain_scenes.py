"""The hand-built scenes of ``recommend --explain``'s tests: 1 KiB tokens, rungs at 1, 2, 4 and 8
tokens, a step of 1 plain and 20 fused all-reduce sites (10 known layers), routes written by hand as
in ``test_costmodel.py``."""

from __future__ import annotations

from typing import Any

from price_tables import FUSED, PLAIN, STEP, flat, table

from topo_gate.launchers.plan.choice import Candidate, Choice, Unlock, Variant
from topo_gate.launchers.plan.costmodel import Pricing, Side, Step, total
from topo_gate.launchers.plan.explain import Row
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Knobs

ROW = 1024
SIZES = tuple(ROW * tokens for tokens in (1, 2, 4, 8))
NCCL_ONLY = ((None, None),)
TWO_STEPS = Workload.from_weights("two", {1: 0.5, 4: 0.5}, "a test mix")
FLAGGED = Candidate(Knobs(args=("--fast",)))
NOTHING = Candidate(Knobs())


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


def choice(
    plain_routes: tuple,
    plain: dict,
    *,
    fused_routes: tuple = NCCL_ONLY,
    fused: dict | None = None,
    workload: Workload = TWO_STEPS,
    candidate: Candidate = FLAGGED,
    step: Step = STEP,
    default_plain: tuple = NCCL_ONLY,
    default_fused: tuple = NCCL_ONLY,
    sizes: tuple = SIZES,
    in_context: frozenset = frozenset(),
    rejected: tuple = (),
    unlock: Unlock | None = None,
) -> Choice:
    """A priced choice on one variant: the plan's routes against NCCL everywhere (or the given default)."""
    fused = fused or {"nccl": {"median": flat(10.0, sizes)}}
    tabs = {
        PLAIN: table(PLAIN, plain, sizes=sizes, hidden=512),
        FUSED: table(FUSED, fused, sizes=sizes, hidden=512),
    }
    pricing = Pricing(tabs, step, ROW, in_context)
    plan = Side.of({PLAIN: plain_routes, FUSED: fused_routes}, "nccl", ROW, workload, step)
    default = Side.of({PLAIN: default_plain, FUSED: default_fused}, "nccl", ROW, workload, step)
    variant = Variant(None, pricing, default, plan, (), total(plan, default, pricing, workload))  # type: ignore[arg-type]
    return Choice(candidate, (variant,), rejected, lambda: unlock)


FAST = {"nccl": {"median": flat(8.0, SIZES)}, "vllm_custom": {"median": flat(4.0, SIZES)}}
#: vllm_custom up to 2 tokens, 4 us against NCCL's 8; fused all-reduces stay on NCCL at 10 us.
PLANNED = choice(upto(2, "vllm_custom"), FAST)


def planned_for(workload: Workload) -> Choice:
    return choice(upto(2, "vllm_custom"), FAST, workload=workload)


def row(**fields: Any) -> Row:
    base: dict[str, Any] = {
        "pattern": PLAIN,
        "first_tokens": 1,
        "last_tokens": 1,
        "default": "nccl",
        "plan": "nccl",
        "default_us": None,
        "plan_us": None,
        "sites": 1,
        "source": "isolated",
        "note": "default not measured: left as it is",
        "row_bytes": ROW,
    }
    return Row(**{**base, **fields})
