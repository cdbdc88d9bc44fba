"""Full GPU sweep of every backend, both patterns, on the GPUs of this node; reports its wall time.

    python benchmarks/trial_sweep.py --world-size 2 --hidden 7168,4096 --graph-calls 32 --out DIR

Runs the GPU backends and the CUDA-graph timer directly (one process per rank, round-robin across
backends within each size, ``--rounds`` rounds), checks every backend's output against
``torch.distributed.all_reduce`` (bit for bit; the fused pattern within bf16 tolerance of a float32
reference), and writes ``DIR/sweep-h<hidden>-k<K>.json`` with per-round group latencies (slowest
rank), per-rank samples and skews, in the shape of evidence ``results`` entries. Prints the median
table and the wall time of the whole sweep (target: <= 30 s at TP2 with prebuilt kernels).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranks import RANK_FLAG, init_rank, spawn_ranks  # noqa: E402

PATTERN_BACKENDS = {
    "allreduce": ("nccl", "trtllm_oneshot", "trtllm_twoshot", "symm_mem_oneshot", "symm_mem_twoshot",
                  "vllm_custom", "pcie_ipc"),
    "allreduce_rmsnorm": ("nccl", "trtllm_fused_oneshot", "trtllm_fused_twoshot"),
}  # fmt: skip
FUSED_TOLERANCE = 3e-2  # bf16 has 8 significant bits: ~0.4% relative per rounding, a few roundings


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--hidden", default="7168,4096")
    parser.add_argument("--tokens", default=",".join(str(2**i) for i in range(13)))
    parser.add_argument("--patterns", default="allreduce,allreduce_rmsnorm")
    parser.add_argument("--backends", default="", help="only these (comma-separated); default: all")
    parser.add_argument("--graph-calls", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=540)
    parser.add_argument(RANK_FLAG, dest="as_rank", action="store_true")
    return parser.parse_args(argv)


def ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.as_rank:
        run_rank(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    spawn_ranks(Path(__file__), args.world_size, argv, args.timeout)
    wall_s = time.perf_counter() - started
    for hidden in ints(args.hidden):
        path = args.out / f"sweep-h{hidden}-k{args.graph_calls}.json"
        print_table(json.loads(path.read_text()))
    print(f"wall time of the sweep: {wall_s:.1f} s (K={args.graph_calls}, {args.rounds} rounds)")


def print_table(sweep: dict) -> None:
    for run in sweep["runs"]:
        print(f"\n{run['pattern']} hidden={sweep['hidden']} K={sweep['graph_calls']}: median us (skew us)")
        for result in run["results"]:
            if result["status"] == "ok":
                median = statistics.median(result["samples_us"])
                skew = statistics.median(result["skew_us"])
                verdict = f"{median:9.2f} ({skew:5.2f})"
            else:
                verdict = f"{result['status']}: {result['reason']}"
            print(f"  {result['backend']:22s} {result['tokens']:5d} tok  {verdict}")


def selected(args: argparse.Namespace, pattern: str) -> tuple[str, ...]:
    wanted = set(args.backends.split(",")) if args.backends else None
    return tuple(name for name in PATTERN_BACKENDS[pattern] if wanted is None or name in wanted)


def run_rank(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    rank, world_size, device = init_rank()
    for hidden in ints(args.hidden):
        runs = [
            sweep_pattern(args, pattern, hidden, rank, world_size, device)
            for pattern in args.patterns.split(",")
        ]
        if rank == 0:
            sweep = {"hidden": hidden, "graph_calls": args.graph_calls, "rounds": args.rounds, "world_size": world_size,
                     "runs": runs}  # fmt: skip
            (args.out / f"sweep-h{hidden}-k{args.graph_calls}.json").write_text(json.dumps(sweep, indent=1))
    dist.destroy_process_group()


def sweep_pattern(args, pattern: str, hidden: int, rank: int, world_size: int, device) -> dict:
    import torch
    import torch.distributed as dist

    from topo_gate.trials.backends import load_backend
    from topo_gate.trials.backends.base import BackendContext
    from topo_gate.trials.worker.timing import make_timer

    tokens_list = ints(args.tokens)
    ctx = BackendContext(
        rank=rank, world_size=world_size, local_rank=device.index, device=device, dtype=torch.bfloat16,
        hidden=hidden, max_tokens=max(tokens_list), pattern=pattern, allow_multicast=False,
        group=dist.group.WORLD, group_class="nvswitch",
    )  # fmt: skip
    timer = make_timer(device, dist.group.WORLD, args.graph_calls, args.warmup)
    backends, statuses = {}, {}
    for name in selected(args, pattern):
        backend = load_backend(name)(ctx)
        reason = backend.unavailable()
        if reason is None:
            try:
                backend.setup()
                backends[name] = backend
            except Exception as exc:  # noqa: BLE001 -- recorded as the backend's verdict
                reason = f"setup failed: {type(exc).__name__}: {exc}"
        statuses[name] = {"status": "ok" if reason is None else "unavailable", "reason": reason}
    results = []
    for tokens in tokens_list:
        results += measure_size(args, ctx, timer, backends, statuses, tokens, world_size)
    for backend in backends.values():
        backend.close()
    return {"tp": world_size, "pattern": pattern, "backends": statuses, "results": results}


def make_buffers(ctx, tokens: int):
    import torch

    from topo_gate.trials.backends.base import TrialBuffers

    generator = torch.Generator(device=ctx.device).manual_seed(1000 * ctx.rank + tokens)
    shape = (tokens, ctx.hidden)
    # Small integers: every partial sum is exact in bf16, so any reduction order gives one answer.
    x = torch.randint(-8, 9, shape, generator=generator, device=ctx.device).to(ctx.dtype)
    buffers = TrialBuffers(x=x, out=torch.empty_like(x))
    if ctx.pattern == "allreduce_rmsnorm":
        shared = torch.Generator(device=ctx.device).manual_seed(tokens)  # same on every rank
        buffers.residual = torch.randint(-8, 9, shape, generator=shared, device=ctx.device).to(ctx.dtype)
        buffers.weight = (torch.rand(ctx.hidden, generator=shared, device=ctx.device) + 0.5).to(ctx.dtype)
        buffers.residual_out = torch.empty_like(x)
    return buffers


def reference(ctx, buffers):
    import torch
    import torch.distributed as dist

    total = buffers.x.clone()
    dist.all_reduce(total)
    if ctx.pattern == "allreduce":
        return total
    summed = (total.float() + buffers.residual.float()).to(ctx.dtype).float()
    return summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-6) * buffers.weight.float()


def measure_size(args, ctx, timer, backends, statuses, tokens, world_size) -> list[dict]:
    import torch
    import torch.distributed as dist

    prepared, results = {}, {}
    for name in selected(args, ctx.pattern):
        entry = {"backend": name, "tokens": tokens, "nbytes": tokens * ctx.hidden * ctx.dtype.itemsize,
                 "status": statuses[name]["status"], "reason": statuses[name]["reason"], "samples_us": [],
                 "per_rank_us": [], "skew_us": [], "graph_calls": args.graph_calls, "max_abs_err": None}  # fmt: skip
        results[name] = entry
        backend = backends.get(name)
        if backend is None:
            continue
        reason = backend.size_unavailable(tokens)
        if reason is not None:
            entry.update(status="unavailable", reason=reason)
            continue
        buffers = make_buffers(ctx, tokens)
        expected = reference(ctx, buffers)
        try:
            call = backend.prepare(tokens, buffers)
            graph = timer.prepare(call, after_capture=backend.after_capture)
            buffers.out.fill_(float("nan"))
            graph.graph.replay()
            torch.cuda.synchronize(ctx.device)
        except Exception as exc:  # noqa: BLE001
            entry.update(status="failed", reason=f"{type(exc).__name__}: {exc}")
            continue
        error = (buffers.out.float() - expected.float()).abs().max().item()
        entry["max_abs_err"] = error
        tolerance = 0.0 if ctx.pattern == "allreduce" else FUSED_TOLERANCE * expected.abs().max().item()
        if not error <= tolerance:  # NaN (never written) fails too
            entry.update(status="wrong", reason=f"max abs error {error} > {tolerance}")
            continue
        prepared[name] = graph
    per_rank = {name: [] for name in prepared}
    for round_index in range(args.rounds):
        for name, graph in prepared.items():
            if round_index == 0:  # names the culprit if a kernel faults
                print(f"rank {ctx.rank}: measuring {name} at {tokens} tokens", file=sys.stderr, flush=True)
            sample = timer.measure(graph)
            per_rank[name].append(sample.per_call_us)
            results[name]["skew_us"].append(sample.skew_us)
    for name, samples in per_rank.items():
        mine = torch.tensor(samples, dtype=torch.float64, device=ctx.device)
        gathered = [torch.empty_like(mine) for _ in range(world_size)]
        dist.all_gather(gathered, mine)
        rows = [row.tolist() for row in gathered]
        results[name]["per_rank_us"] = rows
        results[name]["samples_us"] = [max(column) for column in zip(*rows, strict=True)]
    del prepared
    return list(results.values())


if __name__ == "__main__":
    main(sys.argv[1:])
