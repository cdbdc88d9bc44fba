"""CPU time of one plan per launcher, in milliseconds: what ``exec`` or a plugin spends choosing knobs
for a user's command line on a profile.

Each launcher plans ``--plans`` times in this interpreter after one warm-up plan (which fills the
option tables and manifests that a launch reads once), for a command line of the kind ``exec`` is
handed, so the user's knobs are read and every candidate is merged with them. Per launcher it prints
the median and the lowest CPU time (``time.process_time``: user + system of this process, which a
loaded machine inflates far less than wall time) of one plan, and the load average before and after.

    python benchmarks/plan_cpu.py --plans 20 --profile profiles/h200-x2/h7168-run1.yaml --tp 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from topo_gate.launchers import PLANNERS, PlanRequest  # noqa: E402 -- after the path

DEFAULT_PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "h200-x2" / "h7168-run1.yaml"
#: The served model: a preset, so the plan prices a real step (hidden size, layers, architecture).
MODEL = "qwen3-32b"
#: A command line per launcher as a user writes it, TP size and a flag of their own included.
COMMANDS = {
    "vllm": ("vllm", "serve", "Qwen/Qwen3-32B", "-tp", "{tp}", "--max-model-len", "8192"),
    "sglang": (
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-32B",
        "--tp-size",
        "{tp}",
        "--mem-fraction-static",
        "0.85",
    ),
}


def plan_cpu_ms(launcher: str, profile: str, tp: int, plans: int) -> list[float]:
    """CPU milliseconds of each of ``plans`` plans for ``launcher`` (after one warm-up plan)."""
    argv = tuple(token.format(tp=tp) for token in COMMANDS[launcher])
    request = PlanRequest(
        profile, tp=tp, model=MODEL, trust_unverified_node=True, user_args=argv, user_env={}
    )
    plan = PLANNERS[launcher](request)
    if plan.fallback:
        raise SystemExit(f"{launcher}: the plan fell back: {plan.reason}")
    spent = []
    for _ in range(plans):
        start = time.process_time()
        PLANNERS[launcher](request)
        spent.append((time.process_time() - start) * 1000)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default=str(DEFAULT_PROFILE))
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--plans", type=int, default=20)
    args = parser.parse_args()
    load_before = os.getloadavg()
    for launcher in COMMANDS:
        spent = plan_cpu_ms(launcher, args.profile, args.tp, args.plans)
        print(
            f"{launcher}: one plan {statistics.median(spent):.1f} ms CPU median, "
            f"{min(spent):.1f} lowest ({args.plans} plans, TP {args.tp}, {MODEL})"
        )
    load_after = os.getloadavg()
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")


if __name__ == "__main__":
    main()
