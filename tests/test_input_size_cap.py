"""An input far over its size cap is refused after reading at most the cap, never loaded whole.

A launcher calls ``gate()`` at start-up, and every command reads profiles, evidence and captures: a
multi-GiB file there (a wrong path, a log written over a profile) must cost at most the cap in memory
and reads. Each reader runs in a child process on a sparse 4 GiB file, with its address space limited
to 1 GiB (a reader that loads the file whole fails there instead of taking the machine's memory), and
the child reports the bytes its reads returned, from the kernel's count (``rchar`` in
``/proc/self/io``), around the call alone.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HUGE = 4 << 30
ADDRESS_SPACE = 1 << 30
MiB = 1 << 20
SLACK = 256 * 1024  # reads around the call that are not the file's (a lazily imported module, /proc)

pytestmark = pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/self/io")

CHILD = r"""
import json, sys
from topo_gate import gate
from topo_gate.profile.io import load_profile
from topo_gate.evidence.document import load_evidence
from topo_gate.topology.capture import load_capture
import topo_gate.profile.fingerprint_field  # a set's index parser (and PyYAML), loaded before counting

def rchar():
    with open("/proc/self/io", encoding="ascii") as counters:
        return int(next(line for line in counters if line.startswith("rchar:")).split()[1])

readers = {
    "gate": lambda path: gate(path, tp=2, fingerprint="sha256:" + "0" * 64).reason,
    "gate, profile set": lambda path: gate(path.rsplit("/", 1)[0], tp=2, fingerprint="sha256:" + "0" * 64).reason,
    "load_profile": load_profile,
    "load_evidence": load_evidence,
    "load_capture": load_capture,
}
kind, path = sys.argv[1], sys.argv[2]
read = readers[kind]
before = rchar()
try:
    outcome = str(read(path))
except Exception as error:
    outcome = f"{type(error).__name__}: {error}"
after = rchar()
print(json.dumps({"read": after - before, "outcome": outcome}))
"""

# reader -> (file name, cap in bytes, words the refusal has)
CASES = {
    "gate": ("profile.yaml", 16 * MiB, "larger than 16 MiB; not a profile file"),
    "load_profile": ("profile.yaml", 16 * MiB, "larger than 16 MiB; not a profile file"),
    "load_evidence": ("run.evidence.json", 256 * MiB, "larger than 256 MiB; not an evidence file"),
    "load_capture": ("node.json", 64 * MiB, "larger than 64 MiB; not a capture file"),
}


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _read_in_child(kind: str, path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        preexec_fn=_limited,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _sparse(path: Path) -> Path:
    with path.open("wb") as handle:
        handle.truncate(HUGE)  # a hole: no disk used, reads return zeros
    return path


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_huge_input_is_refused_after_reading_at_most_its_cap(kind: str, tmp_path: Path) -> None:
    name, cap, words = CASES[kind]
    report = _read_in_child(kind, _sparse(tmp_path / name))
    assert words in report["outcome"]
    assert cap < report["read"] <= cap + 1 + SLACK, report


def test_a_huge_member_of_a_profile_set_is_not_read_whole(tmp_path: Path) -> None:
    # The set's index parses each member for its fingerprint: the huge member is read up to the cap,
    # then given up on: no member is this node's, and the answer is NCCL.
    _sparse(tmp_path / "huge.yaml")
    report = _read_in_child("gate, profile set", tmp_path / "huge.yaml")
    assert report["outcome"].endswith("unusable members: huge.yaml"), report
    assert report["read"] <= 16 * MiB + 1 + SLACK, report
