"""Two costs that must stay small, in seconds (median of --runs; a test must not time them on a
shared machine, so they are measured here):

- ``decide``'s bootstrap for a TP8 probe's worth of cells: 20 sizes x 5 backends x 15 rounds x 2000
  resamples (target: well under a second);
- ``load_profile`` refusing hostile files: a YAML alias bomb and a 20 MB file (target: well under a
  second each; the reader must fail fast, not expand or parse them).

    python benchmarks/fail_fast.py --runs 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from topo_gate.evidence.stats import bootstrap_speedups
from topo_gate.profile import ProfileError, load_profile


def bootstrap_tp8_probe() -> None:
    gen = random.Random(3)
    for _ in range(20):
        nccl = [gen.uniform(10, 11) for _ in range(15)]
        candidates = {f"b{k}": [gen.uniform(5, 6) for _ in range(15)] for k in range(5)}
        bootstrap_speedups(nccl, candidates, resamples=2000, rng=random.Random(0))


def refusal(write: Callable[[Path], None]) -> Callable[[], None]:
    path = Path(tempfile.mkdtemp(prefix="topo-gate-bench-")) / "profile.yaml"
    write(path)

    def load() -> None:
        try:
            load_profile(path)
        except ProfileError:
            return
        raise AssertionError(f"{path} was accepted")

    return load


def alias_bomb(path: Path) -> None:
    lines = ['a0: &a0 "lol"'] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path.write_text("\n".join(lines) + "\n")


def twenty_megabytes(path: Path) -> None:
    path.write_text("# padding\n" * (2 * 1024 * 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cases = {
        "bootstrap, TP8 probe's cells": bootstrap_tp8_probe,
        "load_profile, alias bomb": refusal(alias_bomb),
        "load_profile, 20 MB file": refusal(twenty_megabytes),
    }
    for name, run in cases.items():
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        print(f"{name:<32} median {statistics.median(times):.3f} s  (min {min(times):.3f}, {args.runs} runs)")


if __name__ == "__main__":
    main()
