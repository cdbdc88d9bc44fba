"""Median latency tables (us per call) from an evidence file, as Markdown: per run, the isolated
table, then (evidence v1.1) the in-context table and the size-transition costs.

    python scripts/evidence_table.py profiles/h200-x2/h7168-run1.evidence.json

Isolated cells: the median over rounds of the group latency (slowest rank); ``-`` where a backend
was not admitted at that size, or the status (``wrong``, ``failed``, ``timeout``) where it did not
measure; ``*`` marks a backend stopped after the early rounds (not faster than NCCL there).
In-context cells: the all-reduce's cost inside the layer graph, median(layer) - median(GEMM alone),
us per layer, and its speedup over NCCL's in the same graph. Transitions: the extra microseconds of
one replay right after the largest size (decide's ``T``).
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
                    star = "*" if result.get("stopped_early") else ""
                    row.append(f"{statistics.median(result['samples_us']):.2f}{star}")
            kib = next(r["nbytes"] for (n, t), r in cells.items() if t == count) / 1024
            out.append(f"| {count} | {kib:g} | " + " | ".join(row) + " |")
        out.append("")
        out.extend(_context_table(run, hidden))
        out.extend(_transition_table(run, hidden))
    return "\n".join(out)


def _context_table(run: dict, hidden: int) -> list[str]:
    layers: dict[int, dict[str, float]] = {}
    for entry in run.get("context", []):
        layers.setdefault(entry["tokens"], {})[entry["backend"]] = statistics.median(entry["samples_us"])
    if not layers:
        return []
    out = [
        f"In context, TP{run['tp']} {run['pattern']}, hidden {hidden}: all-reduce cost in a GEMM -> all-reduce "
        "graph, us per layer (speedup over nccl there)\n",
        "| tokens | GEMM alone | nccl | candidates |",
        "|---:|---:|---:|---|",
    ]
    for tokens, medians in sorted(layers.items()):
        gemm = medians.pop("gemm")
        base = medians.pop(run["backends"] and "nccl" if "nccl" in medians else next(iter(medians)))
        cost = base - gemm
        others = ", ".join(
            f"{name} {value - gemm:.1f} ({cost / max(value - gemm, 0.01):.2f}x)"
            for name, value in sorted(medians.items(), key=lambda item: item[1])
        )
        out.append(f"| {tokens} | {gemm:.1f} | {cost:.1f} | {others} |")
    out.append("")
    return out


def _transition_table(run: dict, hidden: int) -> list[str]:
    rows = []
    for result in run["results"]:
        after = result.get("after_larger_us")
        if after and result["samples_us"]:
            extra = (statistics.median(after) - statistics.median(result["samples_us"])) * result[
                "graph_calls"
            ]
            rows.append((result["backend"], result["tokens"], extra))
    if not rows:
        return []
    names = sorted({name for name, _, _ in rows})
    tokens = sorted({t for _, t, _ in rows})
    table = {(name, t): extra for name, t, extra in rows}
    out = [
        f"Size transitions, TP{run['tp']} {run['pattern']}, hidden {hidden}: extra us of one replay right after "
        "the largest size\n",
        "| tokens | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for t in tokens:
        out.append(
            f"| {t} | " + " | ".join(f"{table[(n, t)]:.1f}" if (n, t) in table else "-" for n in names) + " |"
        )
    out.append("")
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(tables(json.loads(Path(path).read_text())))
