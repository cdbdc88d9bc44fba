"""What a profile set costs a launcher: ``gate(DIR, ...)`` against ``gate(FILE, ...)``, in-process.

Builds a set of N members (copies of the bundled profiles, each re-sealed under its own fingerprint,
so exactly one matches), then times, interleaved:

- the first ``gate()`` on the set in a fresh interpreter (index built: every member's head read,
  the chosen member parsed and verified), against the first ``gate()`` on the lone file;
- a repeated ``gate()`` on the set in a warm process (listing + one ``stat`` per member, the
  parsed member from the reader's cache), against a repeated ``gate()`` on the lone file.

    python benchmarks/profile_set_lookup.py --members 50 --runs 15
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from topo_gate.profile import dump_profile, load_profile

BUNDLED = Path(__file__).resolve().parent.parent / "profiles" / "h200-x2" / "h7168-run1.yaml"
FIRST = (
    "import topo_gate, time; t = time.perf_counter(); "
    "d = topo_gate.gate({path!r}, tp=2, fingerprint={fp!r}); "
    "print(time.perf_counter() - t); assert not d.fallback, d.reason"
)


def build_set(folder: Path, members: int) -> tuple[str, Path]:
    """N members of which member 0 is the bundled profile; the rest claim other fingerprints."""
    profile = load_profile(BUNDLED)
    for index in range(members):
        fingerprint = profile.node.fingerprint
        if index:
            fingerprint = "sha256:" + hashlib.sha256(f"other-{index}".encode()).hexdigest()
        node = replace(profile.node, fingerprint=fingerprint)
        dump_profile(replace(profile, node=node, digest=None), folder / f"class-{index:03d}.yaml")
    return profile.node.fingerprint, folder / "class-000.yaml"


def first_call(path: Path, fingerprint: str) -> float:
    code = FIRST.format(path=str(path), fp=fingerprint)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return float(out)


def warm_call(path: Path, fingerprint: str, repeats: int = 200) -> float:
    import topo_gate

    topo_gate.gate(path, tp=2, fingerprint=fingerprint)
    start = time.perf_counter()
    for _ in range(repeats):
        topo_gate.gate(path, tp=2, fingerprint=fingerprint)
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        fingerprint, lone = build_set(folder, args.members)
        samples: dict[str, list[float]] = {"set first": [], "file first": [], "set warm": [], "file warm": []}
        for _ in range(args.runs):
            samples["set first"].append(first_call(folder, fingerprint))
            samples["file first"].append(first_call(lone, fingerprint))
            samples["set warm"].append(warm_call(folder, fingerprint))
            samples["file warm"].append(warm_call(lone, fingerprint))
    ms = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    print(f"medians of {args.runs} runs, set of {args.members} members:")
    for name in samples:
        print(f"  gate() {name:<11} {ms[name]:8.3f} ms")


if __name__ == "__main__":
    main()
