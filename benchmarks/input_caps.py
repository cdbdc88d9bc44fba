"""CPU seconds of the inputs that grew with the square of their size, each at its cap (and at half of
it, so the growth shows: linear doubles, quadratic quadruples):

- ``plan``: one launcher plan over a workload file of ``workload.MAX_STEPS`` (4,096) token counts, 1
  to 4,096 tokens (at half the cap, every other one of them), on the synthetic PCIe profile at TP 2 (transitions timed after a few sizes: the
  planner prices each step's expected size transition over every earlier size) and on the bundled
  2x H200 profile. ``exec`` and the plugins pay it at the launcher's start.
- ``redact``: ``redact_text`` on one blank-free word of 60 KB (a failing benchmark's last line, kept
  redacted in the A/B record) and ``redact_argv`` on a 120 KB ``--model`` name, in the shapes that
  made a rule rescan the rest of the word from each character: letters, ``a://`` runs, ``a=`` runs,
  ``?token`` runs.
- ``show``: ``topo-gate show`` on a 12 MB profile (under the 16 MiB input cap) whose skipped reason is
  one word, output to a discarded stream on an 80-column terminal.

    python benchmarks/input_caps.py              # all three
    python benchmarks/input_caps.py --only redact

The figures are process CPU time (``time.process_time``), which a loaded machine inflates less than
wall time; the last line prints the load average. Run it from a checkout: it imports ``topo_gate``
from the folder above.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from topo_gate.launchers import PLANNERS, PlanRequest  # noqa: E402 -- after the path
from topo_gate.launchers.plan.workload import MAX_STEPS  # noqa: E402

PCIE = REPO / "profiles" / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml"
H200 = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
#: The issue's sizes: a 60 KB last line of output, a 120 KB --model name, a 12 MB profile.
LINE_BYTES = 60 * 1024
MODEL_BYTES = 120 * 1024
PROFILE_BYTES = 12 * 1024 * 1024
#: Blank-free words by name: (first characters, the unit repeated after them).
WORDS = {
    "letters": ("", "a"),
    "a:// runs": ("", "a://"),
    "a= runs": ("", "a="),
    "?token...": ("?", "token"),
}


def _cpu(work: Callable[[], object]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def _workload(folder: Path, counts: int) -> Path:
    """``counts`` token counts spread evenly over 1 .. MAX_STEPS tokens: every one at the cap, every
    other one at half of it (the same sizes, so only their number changes: a step's cost depends on
    the rungs around its size)."""
    path = folder / f"w{counts}.yaml"
    stride = MAX_STEPS // counts
    tokens = range(stride, MAX_STEPS + 1, stride)
    path.write_text("steps: {" + ", ".join(f"{t}: {1 + t % 7}" for t in tokens) + "}\n")
    return path


def plan(folder: Path) -> None:
    for profile, tp, launcher in ((PCIE, 2, "sglang"), (PCIE, 2, "vllm"), (H200, 2, "sglang")):
        for counts in (MAX_STEPS // 2, MAX_STEPS):
            request = PlanRequest(
                str(profile), tp=tp, trust_unverified_node=True, workload=str(_workload(folder, counts))
            )
            seconds = _cpu(lambda request=request, launcher=launcher: PLANNERS[launcher](request))
            print(f"plan    {launcher:6s} {profile.stem:34s} {counts:5d} token counts  {seconds:8.2f} s")


def redact() -> None:
    from topo_gate.ab.redact import redact_argv, redact_text

    for name, (head, unit) in WORDS.items():
        for size in (LINE_BYTES // 2, LINE_BYTES):
            word = (head + unit * (size // len(unit) + 1))[:size]
            seconds = _cpu(lambda word=word: redact_text(word))
            print(f"redact  text line of {name:12s} {size // 1024:4d} KB  {seconds:8.3f} s")
        for size in (MODEL_BYTES // 2, MODEL_BYTES):
            word = (head + unit * (size // len(unit) + 1))[:size]
            argv = ["vllm", "serve", "--model", word]
            seconds = _cpu(lambda argv=argv: redact_argv(argv))
            print(f"redact  --model of   {name:12s} {size // 1024:4d} KB  {seconds:8.3f} s")


def show(folder: Path) -> None:
    from topo_gate.cli import main
    from topo_gate.profile import compute_digest
    from topo_gate.profile.yaml_format import parse_yaml, to_yaml

    os.environ["COLUMNS"] = "80"
    for size in (PROFILE_BYTES // 2, PROFILE_BYTES):
        data = parse_yaml(H200.read_text())
        data.pop("digest")
        data["skipped"] = [{"tp": 4, "reason": "x" * size}]
        path = folder / f"big{size}.yaml"
        path.write_text(to_yaml({**data, "digest": compute_digest(data)}))
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            seconds = _cpu(lambda path=path: main(["show", str(path)]))
        print(
            f"show    profile with a one-word reason   {path.stat().st_size / 2**20:5.1f} MB  {seconds:8.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("plan", "redact", "show"), help="one of the three")
    chosen = parser.parse_args().only
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        if chosen in (None, "plan"):
            plan(folder)
        if chosen in (None, "redact"):
            redact()
        if chosen in (None, "show"):
            show(folder)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
