"""What ``import topo_gate`` plus one ``gate()`` call adds to a launcher's start, in milliseconds.

Runs, in fresh interpreters and interleaved (so machine drift hits all alike):

- ``python -c pass``;
- ``python -c "import topo_gate; topo_gate.gate(PROFILE, tp=2)"`` -- the figure with a target of 25 ms;
- the same after importing the standard-library modules the reader shares with every launcher
  (``dataclasses``, ``json``, ``hashlib``, ``typing``; torch alone imports them all), which is what a
  real launcher pays on top of what it already loaded.

``--loader`` picks how the profile's YAML is read: ``fast`` (the default when PyYAML has libyaml:
libyaml composes, ``profile/yaml_fast.py`` builds), ``careful`` (libyaml's events, composed in
Python), ``pure`` (as without libyaml: PyYAML's own scanner).

    python benchmarks/reader_startup.py --runs 20 --profile profiles/examples/synthetic-h200x2.yaml
"""

from __future__ import annotations

import argparse
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
LOADERS = {
    "fast": "",
    "careful": "import topo_gate.profile.yaml_format as f; f._FAST = False; ",
    "pure": "import yaml; yaml.__with_libyaml__ = False; ",  # before topo_gate reads it
}


def time_run(code: str) -> float:
    """Wall-clock seconds of one fresh interpreter running ``code``."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


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
    for code in commands.values():
        time_run(code)  # compile .pyc files and warm the page cache: "cold" = a fresh process
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(max(args.runs, 10)):
        for name, code in commands.items():
            samples[name].append(time_run(code))
    ms = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    runs = len(samples["bare"])
    print(f"medians of {runs} fresh interpreters each ({args.profile.name}, {args.loader} loader):")
    print(f"  python -c pass                          {ms['bare']:6.1f} ms")
    print(f"  import topo_gate + gate(tp=2)           {ms['reader']:6.1f} ms")
    print(f"added by the reader:                      {ms['reader'] - ms['bare']:6.1f} ms  (target <= 25 ms)")
    print(f"added after {SHARED!r}: {ms['shared+reader'] - ms['shared']:6.1f} ms  (what a launcher pays)")


if __name__ == "__main__":
    main()
