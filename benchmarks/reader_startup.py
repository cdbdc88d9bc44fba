"""What ``import topo_gate`` plus one ``gate()`` call adds to a launcher's start, in milliseconds.

Runs, in fresh interpreters and interleaved (so machine drift hits all alike):

- ``python -c pass``;
- ``python -c "import topo_gate; topo_gate.gate(PROFILE, tp=2)"`` -- the figure with a target of 25 ms;
- the same after importing standard-library modules every launcher has loaded by then
  (``dataclasses``, ``json``, ``hashlib``, ``typing``; torch alone imports them all), which is what a
  real launcher pays on top of what it already loaded.

``--loader`` picks how the profile's YAML is read: ``fast`` (the default: the text topo-gate writes
is read line by line without PyYAML, ``profile/yaml_lines.py``; other text as ``libyaml``),
``libyaml`` (libyaml composes, ``profile/yaml_fast.py`` builds), ``careful`` (libyaml's events,
composed in Python), ``pure`` (as without libyaml: PyYAML's own scanner).

Each figure is the median wall time of fresh interpreters, and beside it the CPU time (user + system)
they used, which a loaded machine inflates far less: on a shared machine, quote both with the load
average, which the last line prints (before and after the runs). The children run with their ``.pyc`` files written (``PYTHONDONTWRITEBYTECODE`` is dropped
for them), as an installed topo-gate has them: pip compiles a package when it installs it.

    python benchmarks/reader_startup.py --runs 20 --profile profiles/h200-x2/h7168-run1.yaml
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "examples" / "synthetic-h200x2.yaml"
SHARED = "import dataclasses, json, hashlib, typing"
READER = (
    "import topo_gate; d = topo_gate.gate({path!r}, tp=2, trust_unverified_node=True); "
    "assert not d.fallback, d.reason"
)
# The loaders other than "fast" are forced by making the line reader refuse every text.
_NO_LINES = (
    "import topo_gate.profile.io as i, topo_gate.profile.yaml_format as f, topo_gate.profile.yaml_lines as l; "
    "i.read_canonical = f.read_canonical = lambda text: l.UNSURE; "
)
LOADERS = {
    "fast": "",
    "libyaml": _NO_LINES,
    "careful": _NO_LINES + "import topo_gate.profile.yaml_format as f; f._FAST = False; ",
    "pure": "import yaml; yaml.__with_libyaml__ = False; " + _NO_LINES,  # before topo_gate reads it
}
#: What a launcher's interpreter has: its packages' .pyc files (see the module docstring).
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def time_run(code: str) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=CHILD_ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (at least 10)")
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--loader", choices=sorted(LOADERS), default="fast", help="how the YAML is read")
    args = parser.parse_args()
    reader = LOADERS[args.loader] + READER.format(path=str(args.profile))
    commands = {
        "bare": "pass",
        "reader": reader,
        "shared": SHARED,
        "shared+reader": f"{SHARED}; {reader}",
    }
    load_before = os.getloadavg()
    for code in commands.values():
        time_run(code)  # compile .pyc files and warm the page cache: "cold" = a fresh process
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(max(args.runs, 10)):
        for name, code in commands.items():
            wall, cpu = time_run(code)
            walls[name].append(wall)
            cpus[name].append(cpu)
    ms = {name: statistics.median(values) * 1000 for name, values in walls.items()}
    cpu_ms = {name: statistics.median(values) * 1000 for name, values in cpus.items()}

    def added(of: str, over: str) -> str:
        return f"{ms[of] - ms[over]:6.1f} ms wall, {cpu_ms[of] - cpu_ms[over]:6.1f} ms CPU"

    runs = len(walls["bare"])
    print(f"medians of {runs} fresh interpreters each ({args.profile.name}, {args.loader} loader):")
    print(
        f"  python -c pass                          {ms['bare']:6.1f} ms wall, {cpu_ms['bare']:6.1f} ms CPU"
    )
    print(
        f"  import topo_gate + gate(tp=2)           {ms['reader']:6.1f} ms wall, {cpu_ms['reader']:6.1f} ms CPU"
    )
    print(f"added by the reader:                      {added('reader', 'bare')}  (target <= 25 ms)")
    print(f"ratio to a bare interpreter:              {ms['reader'] / ms['bare']:6.2f}x wall")
    print(f"added after {SHARED!r}: {added('shared+reader', 'shared')}  (what a launcher pays)")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"load average {_load(load_before)} before, {_load(os.getloadavg())} after; {cpus} CPUs")


def _load(averages: tuple[float, float, float]) -> str:
    return "/".join(f"{value:.2f}" for value in averages)


if __name__ == "__main__":
    main()
