"""Wall time of a full TP sweep through the real harness (runner, fresh workers, every backend).

    python benchmarks/trial_sweep.py --tp 2 --hidden 7168,4096 --graph-calls 32 --out DIR

Runs ``python -m topo_gate.trials`` (the same runner and worker ``topo-gate probe`` uses) once per
hidden size with both patterns, every backend, tokens 1..--max-tokens, and prints the wall time of
each sweep and in total -- process start, rendezvous, FlashInfer load, workspace setup, correctness
checks and the interleaved rounds included. Target: <= 30 s for the TP2 sweep on 2x H200 with
prebuilt FlashInfer kernels. Evidence goes to ``DIR/sweep-h<hidden>-k<K>.json``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--hidden", default="7168,4096")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--graph-calls", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    rows, worst = [], 0
    for hidden in (int(h) for h in args.hidden.split(",")):
        evidence = args.out / f"sweep-h{hidden}-k{args.graph_calls}.json"
        command = [
            sys.executable, "-m", "topo_gate.trials", "--device", "cuda", "--tp", str(args.tp),
            "--hidden", str(hidden), "--max-tokens", str(args.max_tokens),
            "--patterns", "allreduce,allreduce_rmsnorm", "--rounds", str(args.rounds),
            "--graph-calls", str(args.graph_calls), "--out", str(evidence),
        ]  # fmt: skip
        start = time.perf_counter()
        status = subprocess.run(command, check=False).returncode
        rows.append((hidden, time.perf_counter() - start, status))
        worst = max(worst, status)

    print(f"\nTP{args.tp} sweep through the harness, K={args.graph_calls}, {args.rounds} rounds:")
    print("| hidden | wall s | exit |\n|---:|---:|---:|")
    for hidden, wall, status in rows:
        print(f"| {hidden} | {wall:.1f} | {status} |")
    print(f"| all | {sum(wall for _, wall, _ in rows):.1f} | {worst} |")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
