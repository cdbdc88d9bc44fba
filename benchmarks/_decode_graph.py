"""The torch side of ``decode_step.py``, inside each rank: the served model's step as a sequence of
kernels, the trial backends its all-reduce sites call, the check of a captured step, and its timing.

A step of ``tokens`` is, per site (two per decoder layer), the row-parallel GEMM
``[tokens, hidden / tp] x [hidden / tp, hidden]`` writing the all-reduce's input, then the norm site's
call: the configuration's backend for that size (``Kernels``), which all-reduces and applies the
residual add + RMSNorm (a fused kernel, or the plain path then the norm: ``composite.py``, or NCCL then
the norm). Each site has its own weight, so the GEMMs stream weights through the GPU's cache as a real
step does; every site of a size shares the activations (x, residual, outputs), as consecutive layers
reuse a launcher's buffers.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from topo_gate.trials.backends import known_backend
from topo_gate.trials.backends.base import Backend, BackendContext, TrialBuffers
from topo_gate.trials.worker import admission, checks
from topo_gate.trials.worker.pool import BackendPool
from topo_gate.trials.worker.session import RankEnv

SEED = 0


def join_group(device_type: str) -> tuple[RankEnv, torch.device]:
    """The standard env rendezvous, as the trial worker joins it (``worker/session.py``)."""
    env = RankEnv.from_environ()
    if device_type == "cuda":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method="env://", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method="env://")
    return env, device


class Model:
    """The weights of ``sites`` row-parallel GEMMs and, per size, a step's activations."""

    def __init__(self, ctx: BackendContext, sites: int, sizes: Iterable[int]) -> None:
        self.ctx = ctx
        self.sites = sites
        self.inner = max(1, ctx.hidden // ctx.world_size)
        shape = (self.inner, ctx.hidden)
        self.weights = [torch.empty(shape, dtype=ctx.dtype, device=ctx.device) for _ in range(sites)]
        self.inputs = {t: torch.empty((t, self.inner), dtype=ctx.dtype, device=ctx.device) for t in sizes}
        # Integer residual, weights of a sane scale: checks.make_buffers's, the trials' own inputs.
        self.buffers = {t: checks.make_buffers(ctx, t, SEED) for t in self.inputs}
        self.randomise()

    def randomise(self) -> None:
        """Values of a model in use (as ``context.gemm_for``'s): what the steps are timed with."""
        generator = torch.Generator(device=self.ctx.device)
        generator.manual_seed(SEED * 7919 + self.ctx.rank)
        for weight in self.weights:
            weight.copy_(
                (torch.rand(weight.shape, generator=generator, device=self.ctx.device) * 2 - 1)
                / math.sqrt(self.inner)
            )
        for a in self.inputs.values():
            a.copy_(torch.rand(a.shape, generator=generator, device=self.ctx.device) * 2 - 1)

    def load_checkable(self) -> None:
        """Inputs whose sums are exact (``checks.py``: small integers) and weights that copy them, so
        every GEMM writes ``x[:, j] = a[:, j % inner]`` exactly and any correct all-reduce matches
        ``torch.distributed.all_reduce`` bit for bit."""
        columns = torch.arange(self.ctx.hidden, device=self.ctx.device)
        for weight in self.weights:
            weight.zero_()
            weight[columns % self.inner, columns] = 1
        for tokens, a in self.inputs.items():
            generator = torch.Generator(device=self.ctx.device)
            generator.manual_seed((SEED * 1_000_003 + tokens) * 65_537 + self.ctx.rank + 1)
            values = torch.randint(
                checks.INPUT_LOW, checks.INPUT_HIGH + 1, a.shape, generator=generator, device=self.ctx.device
            )
            a.copy_(values)

    def expected_x(self, tokens: int) -> torch.Tensor:
        columns = torch.arange(self.ctx.hidden, device=self.ctx.device) % self.inner
        return self.inputs[tokens][:, columns]

    def gemm(self, site: int, tokens: int) -> Callable[[], None]:
        a, weight, x = self.inputs[tokens], self.weights[site], self.buffers[tokens].x

        def row_parallel_gemm() -> None:
            torch.matmul(a, weight, out=x)

        return row_parallel_gemm


class Kernels:
    """The backends the configurations call: one instance per name (``BackendPool``), shared by every
    site and configuration, so a Lamport buffer sees the sequence of sizes serving sends it. Admission,
    setup and close are collectives: every rank asks for the same names in the same order."""

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self.pool = BackendPool()
        self.backends: dict[str, Backend] = {}
        self.refused: dict[str, str] = {}
        self._sizes: dict[tuple[str, int], str | None] = {}
        self._calls: dict[tuple[str, int], Callable[[], None]] = {}

    def reason(self, name: str, tokens: int) -> str | None:
        """Why ``name`` cannot run a step of ``tokens`` (voted across ranks); None: it can."""
        if name not in self.backends and name not in self.refused:
            self._admit(name)
        if name in self.refused:
            return self.refused[name]
        key = (name, tokens)
        if key not in self._sizes:
            local = self.backends[name].size_unavailable(tokens)
            self._sizes[key] = admission.agreed_reason(admission.gather(local, self.ctx))
        return self._sizes[key]

    def _admit(self, name: str) -> None:
        if not known_backend(name):
            self.refused[name] = f"{name}: not a trial backend (no trial times this path)"
            return
        backend, local = self.pool.admit(name, self.ctx)
        reason = admission.agreed_reason(admission.gather(local, self.ctx))
        if reason is not None or backend is None:
            self.refused[name] = f"{name}: {reason}"
            return
        self.pool.setup(backend)
        self.backends[name] = backend

    def call(self, name: str, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        """``name``'s prepared call at ``tokens`` (after ``reason`` admitted it there)."""
        key = (name, tokens)
        if key not in self._calls:
            self._calls[key] = self.backends[name].prepare(tokens, buffers)
        return self._calls[key]

    def after_capture(self, names: Iterable[str]) -> Callable[[], None]:
        """The collective hook after a capture of each backend the names call (a composite hands it to
        its plain instance), once per name, in name order on every rank."""
        chosen = [self.backends[name] for name in sorted(set(names))]

        def hooks() -> None:
            for backend in chosen:
                backend.after_capture()

        return hooks

    def close(self) -> None:
        self._calls.clear()
        self.pool.close_all(lambda _backend: None)


def sequence(
    model: Model, kernels: Kernels, steps: Sequence[int], names: Sequence[str]
) -> Callable[[], None]:
    """One pass over the steps: per step, every site's GEMM then the norm site's call."""
    plan = [
        (
            [model.gemm(site, tokens) for site in range(model.sites)],
            kernels.call(name, tokens, model.buffers[tokens]),
        )
        for tokens, name in zip(steps, names, strict=True)
    ]

    def steps_in_order() -> None:
        for gemms, call in plan:
            for gemm in gemms:
                gemm()
                call()

    return steps_in_order


def check(timer: Any, measurable: Any, model: Model, steps: Sequence[int]) -> dict[str, Any]:
    """The captured sequence replayed once on ``Model.load_checkable`` inputs, its outputs poisoned
    first (``checks.poison``) and judged as the trials judge (``checks.judge``: the sum bit-exact, the
    norm within bf16 tolerance), voted: ``{"ok", "max_abs_err", "reason"}``. Every rank judges every
    size before the vote (the reference is a collective)."""
    sizes = sorted(set(steps))
    for tokens in sizes:
        checks.poison(model.buffers[tokens])
    timer.replay(measurable)
    verdicts = []
    for tokens in sizes:
        held = model.buffers[tokens]
        inputs = TrialBuffers(
            model.expected_x(tokens), held.out, held.residual, held.weight, held.residual_out
        )
        verdicts.append((tokens, checks.judge(held, checks.expected(inputs, model.ctx), model.ctx)))
    local = next(
        (f"{tokens} tokens: {verdict.describe()}" for tokens, verdict in verdicts if not verdict.ok), None
    )
    errors = [v.max_abs_err for _, v in verdicts if v.max_abs_err is not None]
    mine = {"reason": local, "max_abs_err": max(errors) if len(errors) == len(verdicts) else None}
    every = admission.gather(mine, model.ctx)
    wrong = [(rank, entry["reason"]) for rank, entry in enumerate(every) if entry["reason"]]
    seen = [entry["max_abs_err"] for entry in every]
    return {
        "ok": not wrong,
        "max_abs_err": None if None in seen else max(seen),
        "reason": f"wrong answer on rank {wrong[0][0]}: {wrong[0][1]}" if wrong else None,
    }


def slowest(per_call_us: float, ctx: BackendContext) -> float:
    """The slowest rank's time for one replay (the group's latency, as the trials take it)."""
    value = torch.tensor([per_call_us], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(value.item())


def release(measurables: dict[Any, Any], ctx: BackendContext) -> None:
    """Free the captured graphs before the next launcher's, and before any backend closes (NCCL's
    communicator waits for the graphs that captured it: ``loop.PatternTrials.release``)."""
    measurables.clear()
    gc.collect()
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
