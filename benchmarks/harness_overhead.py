"""What the measurement method adds to NCCL's latency at 14 KiB (1 token x hidden 7168 x bf16).

    python benchmarks/harness_overhead.py --world-size 2 [--graph-calls 32] [--rounds 15]

Two numbers, same process, same graph of K captured ``ncclAllReduce`` calls:

- bare: N graph replays back to back, one pair of CUDA events around all of them: per call =
  total / (N * K), the floor that no per-replay method can beat;
- method: ``CudaGraphTimer.measure`` as the worker uses it (device spin, one-element alignment
  all-reduce, events around one replay), median over rounds of the slowest rank.

With ``--evidence FILE`` (evidence of a harness run at hidden 7168, e.g. from
``benchmarks/trial_sweep.py``) it also prints the harness's own NCCL median at 14 KiB from that file,
measured by separate worker processes through the runner, against the bare figure.

Target: harness - bare <= +0.5 us.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranks import RANK_FLAG, init_rank, spawn_ranks  # noqa: E402

HIDDEN = 7168
BARE_REPLAYS = 200


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--graph-calls", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--evidence", help="harness evidence at hidden 7168 to compare with")
    parser.add_argument(RANK_FLAG, dest="as_rank", action="store_true")
    args = parser.parse_args(argv)
    if args.as_rank:
        run_rank(args)
    else:
        spawn_ranks(Path(__file__), args.world_size, argv, timeout_s=300)


def run_rank(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from topo_gate.trials.backends._pynccl import NcclCommunicator
    from topo_gate.trials.worker.timing import CudaGraphTimer

    rank, world_size, device = init_rank()
    comm = NcclCommunicator(dist.group.WORLD, device)
    x = torch.ones(1, HIDDEN, dtype=torch.bfloat16, device=device)
    out = torch.empty_like(x)
    timer = CudaGraphTimer(device, dist.group.WORLD, args.graph_calls, warmup=3)
    captured = timer.prepare(lambda: comm.all_reduce(x, out))

    method = []
    for _ in range(args.rounds):
        mine = torch.tensor([timer.measure(captured).per_call_us], device=device)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        method.append(mine.item())

    bare = []
    for _ in range(args.rounds):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(BARE_REPLAYS):
            captured.graph.replay()
        end.record()
        end.synchronize()
        mine = torch.tensor(
            [start.elapsed_time(end) * 1e3 / (BARE_REPLAYS * args.graph_calls)], device=device
        )
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        bare.append(mine.item())

    if rank == 0:
        bare_us, method_us = statistics.median(bare), statistics.median(method)
        print(f"NCCL 14 KiB TP{world_size} K={args.graph_calls}: bare replays {bare_us:.2f} us/call, "
              f"measurement method {method_us:.2f} us/call, overhead {method_us - bare_us:+.2f} us")  # fmt: skip
        if args.evidence:
            harness_us = harness_nccl_median(args.evidence, nbytes=HIDDEN * 2)
            print(f"NCCL 14 KiB through the harness ({args.evidence}): {harness_us:.2f} us/call, "
                  f"overhead vs bare {harness_us - bare_us:+.2f} us")  # fmt: skip
    del captured
    comm.destroy()
    dist.destroy_process_group()


def harness_nccl_median(path: str, nbytes: int) -> float:
    """The NCCL ``allreduce`` median at ``nbytes`` in a harness evidence file (group latency)."""
    evidence = json.loads(Path(path).read_text())
    for run in evidence["runs"]:
        for result in run["results"]:
            if run["pattern"] == "allreduce" and result["backend"] == "nccl" and result["nbytes"] == nbytes:
                return statistics.median(result["samples_us"])
    raise SystemExit(f"{path}: no NCCL allreduce result at {nbytes} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
