"""In-context confirmation: the all-reduce inside a layer-like CUDA graph, not back to back.

In a decoder layer a row-parallel GEMM precedes each all-reduce: its output is the all-reduce's
input, it occupies the SMs and memory the collective then needs, and the collective's launch
overlaps nothing. Back-to-back trials hide that, and on 2x H200 the backends' order at large sizes
changed in such a graph. So after the isolated rounds, per size, every path a plan may route to is
timed again in graphs of ``calls`` layers, each ``GEMM -> all-reduce [-> residual + RMSNorm]``:

- every backend that *cleared the isolated bar* at that size (``cleared``): its median per call
  (the slowest rank's), plus the transition charge decide's rule 5 applies (the replays after the
  largest size, ``state.charge_us``), is at most the baseline's median / (1 + margin). Only
  medians: decide also asks the CI to clear the bar, which a candidate short of it here could not;
- every backend the plan names in ``context_backends`` (the launchers' default paths) that was
  admitted and correct at that size, win or lose: what a plan must be priced against;
- the baseline, and the same graph without the all-reduce (``GEMM`` alone, named ``gemm``), so the
  all-reduce's in-context cost is ``layer - gemm``: ``decide`` compares those costs.

A size where none of the backends qualifies gets no layer graphs. Composites (``<plain>+rmsnorm``)
qualify like any backend: with fusion off a plan routes the fused pattern to one. The GEMM is the
row-parallel one of the model's shape, ``[tokens, hidden / tp] x [hidden / tp, hidden]`` (an
attention output or MLP down projection whose input is split across the TP ranks), writing straight
into the buffer the all-reduce reads. ``ROUNDS`` interleaved rounds, the order rotated per round, as
the isolated rounds are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from topo_gate.evidence.names import GEMM
from topo_gate.trials.backends.base import BackendContext, TrialBuffers
from topo_gate.trials.worker.state import RankPattern

ROUNDS = 9


def calls_per_graph(graph_calls: int) -> int:
    """Layers per in-context graph: a quarter of the isolated graph's calls (a layer costs more)."""
    return max(2, graph_calls // 4)


def cleared(trials: RankPattern, charged: Mapping[tuple[str, int], float]) -> dict[int, list[str]]:
    """Per size, the backends that cleared the isolated bar there (module docstring), fastest first.
    ``charged``: the group medians with the transition charge (``RankPattern.group_medians``)."""
    baseline, threshold = trials.plan.backends[0], 1 + trials.plan.margin
    by_size: dict[int, list[str]] = {}
    for tokens in trials.plan.tokens:
        base = charged.get((baseline, tokens))
        if base is None:
            continue
        winners = sorted(
            (median, name)
            for (name, size), median in charged.items()
            if size == tokens and name != baseline and base >= threshold * median
        )
        by_size[tokens] = [name for _, name in winners]
    return by_size


def time_layers(trials: RankPattern) -> None:
    """The layer graphs of every size (module docstring), into ``trials.context``."""
    plan = trials.plan
    baseline = plan.backends[0]
    charged = trials.group_medians(charge=True)
    winners = cleared(trials, charged)
    calls = calls_per_graph(plan.graph_calls)
    for tokens in plan.tokens:
        if (baseline, tokens) not in trials.passed:
            continue  # nothing to compare with
        defaults = [n for n in plan.context_backends if n != baseline and (n, tokens) in trials.passed]
        chosen = sorted(
            set(winners.get(tokens, ())) | set(defaults),
            key=lambda n: (charged.get((n, tokens), math.inf), n),
        )
        if not chosen:
            continue
        gemm = gemm_for(trials.ctx, tokens, trials.buffers[tokens], plan.seed)
        graphs = {GEMM: trials.timer.prepare(gemm, calls=calls)}
        for name in [baseline, *chosen]:
            trials.beat("context", name, tokens)
            graphs[name] = trials.timer.prepare(
                layer(gemm, trials.passed[(name, tokens)]),
                after_capture=trials.backends[name].after_capture,
                calls=calls,
            )
        entries = {name: record(trials.context, name, tokens) for name in graphs}
        for round_index in range(ROUNDS):
            for name in rotated(list(graphs), round_index):
                trials.beat("context", None if name == GEMM else name, tokens, round_index)
                sample = trials.timer.measure(graphs[name])
                entries[name]["per_call_us"].append(sample.per_call_us)
                entries[name]["skew_us"].append(sample.skew_us)
        del graphs


def gemm_for(ctx: BackendContext, tokens: int, buffers: TrialBuffers, seed: int) -> Callable[[], None]:
    """The row-parallel GEMM writing into ``buffers.x``, on seeded inputs of a sane scale."""
    inner = max(1, ctx.hidden // ctx.world_size)
    generator = torch.Generator(device=ctx.device)
    generator.manual_seed(seed * 7919 + tokens)
    a = (torch.rand((tokens, inner), generator=generator, device=ctx.device) * 2 - 1).to(ctx.dtype)
    w = (
        (torch.rand((inner, ctx.hidden), generator=generator, device=ctx.device) * 2 - 1) / math.sqrt(inner)
    ).to(ctx.dtype)
    x = buffers.x

    def gemm() -> None:
        torch.matmul(a, w, out=x)

    return gemm


def layer(gemm: Callable[[], None], call: Callable[[], None]) -> Callable[[], None]:
    def gemm_then_collective() -> None:
        gemm()
        call()

    return gemm_then_collective


def record(context: list[dict[str, Any]], name: str, tokens: int) -> dict[str, Any]:
    entry = {"backend": name, "tokens": tokens, "per_call_us": [], "skew_us": []}
    context.append(entry)
    return entry


def rotated(names: Sequence[str], round_index: int) -> list[str]:
    """Round r starts at name r mod n, so drift hits every backend alike (isolated rounds too)."""
    start = round_index % len(names)
    return list(names[start:]) + list(names[:start])
