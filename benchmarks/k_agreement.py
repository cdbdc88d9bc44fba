"""Is the timing trustworthy? The same backend measured with two graph lengths K must agree.

    python benchmarks/k_agreement.py sweep-h7168-k32.json sweep-h7168-k64.json [--tolerance 0.05]

Reads two evidence files of the same node, hidden size and sizes, measured with different
``graph_calls``, and prints per (pattern, backend, size) the medians and their relative difference.
Rank start skew and per-replay overhead are amortised over K calls, so a method that controls them
reads the same per-call latency at K and 2K; a difference beyond the tolerance means the figure
depends on how it was measured, not only on the backend. Exit 1 if any cell disagrees.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def medians(path: Path) -> tuple[int, dict[tuple[str, str, int], float]]:
    evidence = json.loads(path.read_text())
    cells = {}
    for run in evidence["runs"]:
        for result in run["results"]:
            if result["status"] == "ok" and result["samples_us"]:
                key = (run["pattern"], result["backend"], result["tokens"])
                cells[key] = statistics.median(result["samples_us"])
    return evidence["trials"]["method"]["graph_calls"], cells


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args(argv)
    k1, first = medians(args.first)
    k2, second = medians(args.second)
    common = sorted(first.keys() & second.keys())
    if not common:
        print("no (pattern, backend, size) measured in both files")
        return 1
    print(f"| pattern | backend | tokens | K={k1} us | K={k2} us | diff |\n|---|---|---:|---:|---:|---:|")
    worst: dict[tuple[str, str], float] = {}
    for key in common:
        a, b = first[key], second[key]
        diff = (b - a) / a
        worst[key[:2]] = max(worst.get(key[:2], 0.0), abs(diff))
        flag = "" if abs(diff) <= args.tolerance else "  <-- beyond tolerance"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {a:.2f} | {b:.2f} | {diff:+.1%}{flag} |")
    print("\nworst |diff| per backend:")
    for (pattern, backend), value in sorted(worst.items()):
        print(f"  {pattern:18} {backend:22} {value:.1%}")
    bad = [key for key in common if abs(second[key] - first[key]) / first[key] > args.tolerance]
    print(f"\n{len(common) - len(bad)}/{len(common)} cells agree within {args.tolerance:.0%}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
