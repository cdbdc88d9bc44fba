"""Back-to-back ``topo-gate probe`` runs: wall time, where it goes, and how far the profiles agree.

    python benchmarks/probe_wall.py --runs 2 --out DIR -- --tp 2 --hidden 7168

Runs the probe ``--runs`` times back to back (arguments after ``--`` go to every run; ``--out`` and
``--evidence`` are added), then prints per run: the wall time of the whole command, and per plan the
worker phases' seconds (import, rendezvous, admit, setup, check, capture, measure, transition,
context, recheck, close: the slowest rank's) from the evidence; then the agreement: the share of
measured size buckets (per TP, pattern and measured message size) whose backend is the same in
every run's profile. Target: <= 40 s per TP2 probe on 2x H200 with prebuilt kernels; >= 95 %
agreement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from topo_gate.profile.io import load_profile


def buckets(profile_path: Path, evidence_path: Path) -> dict[tuple[int, str, int], str]:
    """(tp, pattern, measured nbytes) -> the profile's backend there."""
    profile = load_profile(profile_path)
    evidence = json.loads(evidence_path.read_text())
    chosen = {}
    for run in evidence["runs"]:
        entry = next(e for e in profile.decisions if (e.tp, e.pattern) == (run["tp"], run["pattern"]))
        for nbytes in sorted({cell["nbytes"] for cell in run["results"]}):
            chosen[(run["tp"], run["pattern"], nbytes)] = entry.rule_for(nbytes)[1].backend
    return chosen


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prefix", default="run", help="files are <prefix><N>.yaml and .evidence.json")
    args = parser.parse_args(argv[:split])
    probe_args = argv[split + 1 :]
    args.out.mkdir(parents=True, exist_ok=True)
    walls, runs, worst = [], [], 0
    for index in range(1, args.runs + 1):
        profile = args.out / f"{args.prefix}{index}.yaml"
        evidence = args.out / f"{args.prefix}{index}.evidence.json"
        command = [sys.executable, "-m", "topo_gate", "probe", *probe_args, "--out", str(profile),
                   "--evidence", str(evidence)]  # fmt: skip
        start = time.perf_counter()
        status = subprocess.run(command, check=False).returncode
        walls.append(time.perf_counter() - start)
        worst = max(worst, status)
        if status == 0:
            runs.append((profile, evidence))
    print("\n| run | wall s | plan | plan wall s | slowest rank's phases, s |\n|---:|---:|---|---:|---|")
    for index, (_, evidence) in enumerate(runs, start=1):
        for plan in json.loads(evidence.read_text())["runs"]:
            phases = ", ".join(f"{k} {v:.1f}" for k, v in plan["phases_s"].items())
            print(
                f"| {index} | {walls[index - 1]:.1f} | TP{plan['tp']} {plan['pattern']} | {plan['wall_s']:.1f} | {phases} |"
            )
    if len(runs) >= 2:
        tables = [buckets(profile, evidence) for profile, evidence in runs]
        keys = sorted(set.intersection(*(set(t) for t in tables)))
        same = [key for key in keys if len({t[key] for t in tables}) == 1]
        print(f"\nagreement: {len(same)}/{len(keys)} size buckets = {100 * len(same) / len(keys):.1f} %")
        for key in keys:
            if key not in same:
                print(f"  differs: TP{key[0]} {key[1]} {key[2]} B: {[t[key] for t in tables]}")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
