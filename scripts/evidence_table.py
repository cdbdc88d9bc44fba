"""Median latency tables (us per call) from an evidence file, as Markdown: one table per run.

    python scripts/evidence_table.py profiles/h200-x2/sweeps/sweep-h7168-k32.json

Cells: the median over rounds of the group latency (slowest rank); ``-`` where a backend was not
admitted at that size, or the status (``wrong``, ``failed``, ``timeout``) where it did not measure.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def tables(evidence: dict) -> str:
    out = []
    hidden = evidence["trials"]["hidden"]
    for run in evidence["runs"]:
        names = list(run["backends"])
        cells = {(r["backend"], r["tokens"]): r for r in run["results"]}
        tokens = sorted({r["tokens"] for r in run["results"]})
        out.append(f"### TP{run['tp']} {run['group_class']} {run['pattern']}, hidden {hidden}\n")
        out.append("| tokens | KiB | " + " | ".join(names) + " |")
        out.append("|---:|---:|" + "---:|" * len(names))
        for count in tokens:
            row = []
            for name in names:
                result = cells.get((name, count))
                if result is None or result["status"] == "unavailable":
                    row.append("-")
                elif result["status"] != "ok":
                    row.append(result["status"])
                else:
                    row.append(f"{statistics.median(result['samples_us']):.2f}")
            kib = next(r["nbytes"] for (n, t), r in cells.items() if t == count) / 1024
            out.append(f"| {count} | {kib:g} | " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(tables(json.loads(Path(path).read_text())))
