"""In-context confirmation: the all-reduce inside a layer-like CUDA graph, not back to back.

In a decoder layer a row-parallel GEMM precedes each all-reduce: its output is the all-reduce's
input, it occupies the SMs and memory the collective then needs, and the collective's launch
overlaps nothing. Back-to-back trials hide that, and on 2x H200 the backends' order at large sizes
changed in such a graph. So after the isolated rounds, per size, the backends that were faster than
the baseline there (the ``CANDIDATES`` fastest, composites excluded: they are never a rule) are timed
again in graphs of ``calls`` layers, each ``GEMM -> all-reduce [-> residual + RMSNorm]``:

- the GEMM is the row-parallel one of the model's shape: ``[tokens, hidden / tp] x [hidden / tp,
  hidden]`` (an attention output or MLP down projection whose input is split across the TP ranks),
  writing straight into the buffer the all-reduce reads;
- the same graph without the all-reduce (``GEMM`` alone, named ``gemm``) is timed alongside, so
  the all-reduce's in-context cost is ``layer - gemm``: ``decide`` compares those costs;
- ``ROUNDS`` interleaved rounds, the order rotated per round, as the isolated rounds are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from topo_gate.trials.backends.base import BackendContext, TrialBuffers

GEMM = "gemm"
CANDIDATES = 4
ROUNDS = 9


def calls_per_graph(graph_calls: int) -> int:
    """Layers per in-context graph: a quarter of the isolated graph's calls (a layer costs more)."""
    return max(2, graph_calls // 4)


def candidates(
    tokens: int, medians: Mapping[tuple[str, int], float], baseline: str, names: Sequence[str]
) -> list[str]:
    """The backends faster than the baseline at ``tokens`` by their group medians, fastest first."""
    base = medians.get((baseline, tokens))
    if base is None:
        return []
    faster = sorted(
        (medians[(name, tokens)], name)
        for name in names
        if name != baseline and (name, tokens) in medians and medians[(name, tokens)] < base
    )
    return [name for _, name in faster[:CANDIDATES]]


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
