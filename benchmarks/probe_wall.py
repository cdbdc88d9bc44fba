"""Where a probe's wall time goes, by worker phase; and what one worker session per group saves.

    python benchmarks/probe_wall.py sessions --device cpu --tp 2 --hidden 256 --max-tokens 8 --repeat 3
    python benchmarks/probe_wall.py probe --runs 2 --out DIR -- --tp 2 --hidden 7168

``sessions``: side by side in one run, alternating, ``--repeat`` times: every pattern in one worker
session per TP group (what ``probe`` runs), and each pattern in a session of its own (the old way,
one worker group per pattern) -- both through the same ``trials.runner.run_trial_session``, on the plans
``probe`` makes. Prints per phase the median seconds of each way (the slowest rank's per attempt,
summed over the sessions) and the ratio; start-up (import, rendezvous, setup, close) is what one
session pays once.

``probe``: back-to-back ``topo-gate probe`` runs (arguments after ``--`` go to every run; ``--out``
and ``--evidence`` are added): per run the command's wall time, and per worker session and run its
phases from the evidence; then the agreement: the share of measured size buckets (per TP, pattern
and size) whose backend is the same in every run's profile. Targets on 2x H200 (TP2, both patterns,
prebuilt kernels): <= 40 s a probe, >= 95 % agreement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from topo_gate.probe import ProbeOptions, cpu_node, gpu_node, plan_trials
from topo_gate.profile.io import load_profile
from topo_gate.trials.cost import PHASES
from topo_gate.trials.plan import SessionPlan
from topo_gate.trials.runner import run_trial_session

START_UP = ("import", "rendezvous", "setup", "close")


def sessions_side_by_side(args: argparse.Namespace) -> int:
    options = ProbeOptions(
        out=Path("unused.yaml"), hidden=args.hidden, tps=tuple(args.tp), device=args.device,
        max_tokens=args.max_tokens, rounds=args.rounds, graph_calls=args.graph_calls,
    )  # fmt: skip
    facts = cpu_node(options.tps) if args.device == "cpu" else gpu_node(None, None)
    shared, _ = plan_trials(facts, options)
    separate = [SessionPlan((plan,)) for session in shared for plan in session.plans]
    ways = {"one session": shared, "a session per pattern": separate}
    seen: dict[str, list[dict[str, float]]] = {way: [] for way in ways}
    with tempfile.TemporaryDirectory(prefix="probe-wall-") as workdir:
        for repeat in range(args.repeat):
            for number, (way, sessions) in enumerate(ways.items()):
                seen[way].append(_run(sessions, facts, Path(workdir) / f"{repeat}-{number}", args))
                print(f"repeat {repeat + 1}, {way}: {seen[way][-1]['wall']:.1f} s", file=sys.stderr)
    one, two = ({k: statistics.median(r[k] for r in seen[w]) for k in seen[w][0]} for w in ways)
    print(f"\n{args.device}, TP {','.join(map(str, args.tp))}, hidden {args.hidden}, up to {args.max_tokens} "
          f"tokens, {args.rounds} rounds, K={args.graph_calls}; medians of {args.repeat}\n")  # fmt: skip
    print("| phase | one session, s | a session per pattern, s | ratio |\n|---|---:|---:|---:|")
    for phase in [*PHASES, "start-up", "wall"]:
        if phase in one:
            ratio = f"{two[phase] / one[phase]:.2f}" if one[phase] > 0 else "-"
            print(f"| {phase} | {one[phase]:.2f} | {two[phase]:.2f} | {ratio} |")
    return 0


def _run(
    sessions: Sequence[SessionPlan], facts: object, workdir: Path, args: argparse.Namespace
) -> dict[str, float]:
    """Every session in turn: per phase the seconds summed over them, ``start-up``, and ``wall``."""
    phases = dict.fromkeys(PHASES, 0.0)
    started = time.perf_counter()
    for index, session in enumerate(sessions):
        devices = [facts.uuids.get(g) or str(g) for g in session.group] if args.device == "cuda" else []  # type: ignore[attr-defined]
        result = run_trial_session(
            session, device=args.device, cuda_devices=devices, timeout_s=120.0, workdir=workdir / str(index),
            startup_timeout_s=900.0,
        )  # fmt: skip
        for phase, seconds in result.phases_s.items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    phases["start-up"] = sum(phases[p] for p in START_UP)
    phases["wall"] = time.perf_counter() - started
    return phases


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


def repeated_probes(args: argparse.Namespace, probe_args: list[str]) -> int:
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
            runs.append((index, profile, evidence))
    print("\n| run | wall s | what | wall s | slowest rank's phases, s |\n|---:|---:|---|---:|---|")
    for index, _, evidence in runs:
        seen = set()
        for run in json.loads(evidence.read_text())["runs"]:
            session = run.get("session")
            if session is not None and session["id"] not in seen:
                seen.add(session["id"])
                print(_row(index, walls[index - 1], f"session {session['id']}", session))
            print(_row(index, walls[index - 1], f"TP{run['tp']} {run['pattern']}", run))
    if len(runs) >= 2:
        tables = [buckets(profile, evidence) for _, profile, evidence in runs]
        keys = sorted(set.intersection(*(set(t) for t in tables)))
        same = [key for key in keys if len({t[key] for t in tables}) == 1]
        print(f"\nagreement: {len(same)}/{len(keys)} size buckets = {100 * len(same) / len(keys):.1f} %")
        for key in keys:
            if key not in same:
                print(f"  differs: TP{key[0]} {key[1]} {key[2]} B: {[t[key] for t in tables]}")
    return worst


def _row(index: int, wall: float, what: str, record: dict) -> str:
    phases = ", ".join(f"{k} {v:.1f}" for k, v in record["phases_s"].items())
    return f"| {index} | {wall:.1f} | {what} | {record['wall_s']:.1f} | {phases} |"


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    side = modes.add_parser("sessions", help="one session per group against a session per pattern")
    side.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    side.add_argument("--tp", type=int, nargs="+", default=[2])
    side.add_argument("--hidden", type=int, default=256)
    side.add_argument("--max-tokens", type=int, default=8)
    side.add_argument("--rounds", type=int, default=15)
    side.add_argument("--graph-calls", type=int, default=8)
    side.add_argument("--repeat", type=int, default=3)
    probes = modes.add_parser("probe", help="back-to-back topo-gate probe runs (arguments after --)")
    probes.add_argument("--runs", type=int, default=2)
    probes.add_argument("--out", type=Path, required=True)
    probes.add_argument("--prefix", default="run", help="files are <prefix><N>.yaml and .evidence.json")
    args = parser.parse_args(argv[:split])
    if args.mode == "sessions":
        return sessions_side_by_side(args)
    return repeated_probes(args, argv[split + 1 :])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
