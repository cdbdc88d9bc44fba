"""What ``decide``'s bootstrap costs for a TP8-sized probe, in seconds (a figure, not a test).

20 message sizes x 5 candidate backends x 15 rounds x 2000 resamples, the size of a TP8 probe's
decision, timed over several repeats:

    python benchmarks/bootstrap_cost.py --repeats 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from topo_gate.evidence.stats import bootstrap_speedups


def one_probe_worth(seed: int) -> float:
    gen = random.Random(seed)
    cells = [
        (
            [gen.uniform(10, 11) for _ in range(15)],
            {f"b{k}": [gen.uniform(5, 6) for _ in range(15)] for k in range(5)},
        )
        for _ in range(20)
    ]
    start = time.perf_counter()
    for nccl, candidates in cells:
        bootstrap_speedups(nccl, candidates, resamples=2000, rng=random.Random(0))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    seconds = [one_probe_worth(seed) for seed in range(args.repeats)]
    print(
        f"bootstrap of a TP8 probe's cells: median {statistics.median(seconds):.3f} s, "
        f"min {min(seconds):.3f} s, max {max(seconds):.3f} s over {args.repeats} repeats"
    )


if __name__ == "__main__":
    main()
