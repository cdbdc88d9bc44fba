"""The plugins' whole work in a launcher's process, in milliseconds: import, node check, plan, apply.

A launcher that loads the SGLang or vLLM plugin pays, at each start, for importing the plugin module,
checking the node, planning against the profile and applying the plan to its parsed configuration.
Each sample is a fresh interpreter (this file run with ``--sample``) that does exactly that, on the
plugin's own call path, and reports its CPU (``time.process_time``: user + system of that process)
and wall time per step:

- ``import``: ``import topo_gate.plugins.<launcher>`` (what the launcher's entry point loads);
- ``node``: the node check, ``topology.nodecheck.current_fingerprint`` reading the NVML capture
  recorded on the profile's node (``--capture``; on a GPU node the plugin reads NVML in a child
  process, whose own CPU is not the launcher's); the fingerprint is then handed to the plugin as
  ``TOPO_GATE_NODE_FINGERPRINT``, as a verified node is;
- ``plan``: ``plugins.plan_in_launcher`` (the planner ``exec`` runs), the served model as the launcher's
  configuration reports it (``--hidden``, ``--layers``, ``--architecture``);
- ``apply``: the hook's steps after the plan -- the fields set on the launcher's parsed configuration
  (the labelled stand-ins of ``tests/plugins/stand_ins.py``: real field names and defaults of the
  pinned releases; neither launcher is installed here), the env exported, the profile's digest read
  and the one log line written (to a discarded stderr).

Before the clock starts, each sample does what the launcher itself did to find the plugin: it lists
the plugin entry points of its group through ``importlib.metadata`` (vLLM 0.33.0
``vllm/plugins/__init__.py:38-42``, SGLang 0.5.23 ``sglang/srt/plugins/__init__.py:15,57``), so the
plugin's own reading of installed versions is not charged for an import the launcher already paid.

The table gives the medians over ``--runs`` samples per launcher, interleaved so machine drift hits
both alike; ``total CPU`` is the four steps' CPU together, the figure with a target of 150 ms. The
interpreter's own start is not in it (``python -c pass``'s median is printed for reference). The
children run with their ``.pyc`` files written, as an installed topo-gate has them.

    python benchmarks/plugin_startup.py --runs 15
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's topo_gate, whatever else is installed
DEFAULT_PROFILE = ROOT / "profiles" / "h200-x2" / "h7168-run1.yaml"
DEFAULT_CAPTURE = ROOT / "profiles" / "h200-x2" / "h200-x2.capture.json"
LAUNCHERS = ("sglang", "vllm")
STEPS = ("import", "node", "plan", "apply")
#: The budget for the four steps together, CPU, per launcher start.
TARGET_CPU_MS = 150
#: The entry-point group each launcher loads the plugin from (``pyproject.toml``'s entry points).
PLUGIN_GROUPS = {"sglang": "sglang.srt.plugins", "vllm": "vllm.general_plugins"}
#: Fewer samples than this and a median says little on a shared machine.
MIN_RUNS = 5
#: What a launcher's interpreter has: its packages' .pyc files.
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _clock() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def sample(launcher: str, profile: str, capture: str, served: dict[str, Any]) -> dict[str, Any]:
    """One launcher start's plugin work in this (fresh) interpreter; CPU and wall ms per step."""
    from importlib.metadata import entry_points

    entry_points(group=PLUGIN_GROUPS[launcher])  # the launcher's own search for its plugins
    os.environ["TOPO_GATE_PROFILE"] = profile  # the user's setting
    marks = [_clock()]
    module = __import__(f"topo_gate.plugins.{launcher}", fromlist=["register"])
    marks.append(_clock())
    # The stand-ins of the launcher's configuration are the launcher's, not the plugin's: off the clock.
    sys.path.insert(0, str(ROOT / "tests" / "plugins"))
    import stand_ins  # type: ignore[import-not-found]

    marks[-1] = _clock()

    from topo_gate.profile.given_fingerprint import FINGERPRINT_ENV
    from topo_gate.topology.nodecheck import current_fingerprint

    os.environ[FINGERPRINT_ENV] = current_fingerprint(capture)
    marks.append(_clock())

    import topo_gate.plugins as plugins

    tp = int(served["tp"])
    config: object
    if launcher == "sglang":
        config = stand_ins.StandInServerArgs(model_path="/models/served", tp_size=tp)
    else:
        config = stand_ins.StandInEngineArgs(model="/models/served", tensor_parallel_size=tp)
    defaults = stand_ins.field_defaults(config)
    flags = plugins.user_args(config, launcher, defaults)
    facts = plugins.Served(tp, served["hidden"], served["layers"], served["architecture"], flags)
    plan, fingerprint = plugins.plan_in_launcher(launcher, served=lambda: facts, profile=profile)
    marks.append(_clock())

    if launcher == "vllm":
        kept = module._apply(config, plan)
    else:  # SGLang's ``_apply`` reads the defaults off its msgspec Struct; the stand-in's are the dataclass's
        _, kept = plugins.apply_flags(config, launcher, plan, defaults)
        kept = (*kept, *plugins.export_env(plan.env, os.environ))
    digest = plugins.profile_digest(profile, fingerprint)
    plugins.record(plugins.Outcome(launcher, digest, plan, (), kept), fingerprint, os.environ)
    marks.append(_clock())

    return {
        "fallback": plan.fallback,
        "reason": plan.reason,
        "args": list(plan.args),
        "cpu": {step: (marks[i + 1][0] - marks[i][0]) * 1000 for i, step in enumerate(STEPS)},
        "wall": {step: (marks[i + 1][1] - marks[i][1]) * 1000 for i, step in enumerate(STEPS)},
    }


def run_sample(launcher: str, args: argparse.Namespace) -> dict[str, Any]:
    served = {"tp": args.tp, "hidden": args.hidden, "layers": args.layers, "architecture": args.architecture}
    command = [
        sys.executable,
        __file__,
        "--sample",
        launcher,
        "--profile",
        str(args.profile),
        "--capture",
        str(args.capture),
        "--served",
        json.dumps(served),
    ]
    done = subprocess.run(command, env=CHILD_ENV, capture_output=True, text=True, check=True, cwd=ROOT)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def bare_interpreter_ms() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=CHILD_ENV)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help=f"samples per launcher (at least {MIN_RUNS})")
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--capture", type=Path, default=DEFAULT_CAPTURE, help="the node's NVML capture")
    parser.add_argument("--tp", type=int, default=2)
    # The profile's own model shape: DeepSeek-V3's hidden size (7168) and layer count.
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--layers", type=int, default=61)
    parser.add_argument("--architecture", default="DeepseekV3ForCausalLM")
    parser.add_argument("--sample", choices=LAUNCHERS, help=argparse.SUPPRESS)
    parser.add_argument("--served", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sample:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- the plugin's log line, discarded
        result = sample(args.sample, str(args.profile), str(args.capture), json.loads(args.served))
        print(json.dumps(result))
        return

    load_before = os.getloadavg()
    for launcher in LAUNCHERS:
        first = run_sample(launcher, args)  # writes the .pyc files; also shows what is planned
        print(
            f"{launcher}: {'fallback' if first['fallback'] else 'plan'} {' '.join(first['args']) or '-'}: "
            f"{first['reason']}"
        )
    runs = max(args.runs, MIN_RUNS)
    samples: dict[str, list[dict[str, Any]]] = {launcher: [] for launcher in LAUNCHERS}
    bare: list[float] = []
    for _ in range(runs):
        bare.append(bare_interpreter_ms())
        for launcher in LAUNCHERS:
            samples[launcher].append(run_sample(launcher, args))

    print(f"\nmedians of {runs} fresh interpreters ({args.profile.name}, TP{args.tp}), ms:")
    print(f"{'launcher':<9}{'import':>8}{'node':>7}{'plan':>7}{'apply':>7}{'total CPU':>11}{'wall':>7}")
    for launcher, taken in samples.items():
        cpu = {step: statistics.median(s["cpu"][step] for s in taken) for step in STEPS}
        total_cpu = statistics.median(sum(s["cpu"].values()) for s in taken)
        wall = statistics.median(sum(s["wall"].values()) for s in taken)
        print(
            f"{launcher:<9}{cpu['import']:8.1f}{cpu['node']:7.1f}{cpu['plan']:7.1f}{cpu['apply']:7.1f}"
            f"{total_cpu:11.1f}{wall:7.1f}"
        )
    print(f"(step columns: CPU; total CPU target <= {TARGET_CPU_MS} ms; wall: the four steps' wall time)")
    print(f"python -c pass: {statistics.median(bare):.1f} ms wall")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"load average {_load(load_before)} before, {_load(os.getloadavg())} after; {cpus} CPUs")


def _load(averages: tuple[float, float, float]) -> str:
    return "/".join(f"{value:.2f}" for value in averages)


if __name__ == "__main__":
    main()
