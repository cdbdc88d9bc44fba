"""Properties over evidence and capture files, as bytes and as JSON: whatever is in the file, the
command that reads it either works (and what it produced is valid) or exits 3 with one line naming
the file. Never another exit code, never a traceback, never two lines.

Like the profile properties (tests/profile/test_mutations.py): random byte edits of real files,
and any JSON value dropped anywhere into their structure.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import random
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topo_gate.cli import main
from topo_gate.profile import Profile
from topo_gate.profile.semantics import check_semantics

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CAPTURE_FILE = REPO / "tests" / "fixtures" / "captures" / "h200-x2.real.json"
CPU_EVIDENCE_FILE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
SEED_CASE = REPO / "tests" / "decide" / "cases" / "seed_lesson_pcie_tp2_wins_tp4_loses.json"
PCIE_CAPTURE = REPO / "tests" / "fixtures" / "captures" / "rtx-pro-6000-pcie-x8.synthetic.json"

CAPTURE = json.loads(CAPTURE_FILE.read_text(encoding="utf-8"))
# GPU evidence carrying its node's capture (the decide case joined with a recorded capture), and the
# gloo harness's own recording: between them every branch of the evidence reader.
GPU_EVIDENCE = {
    **json.loads(SEED_CASE.read_text(encoding="utf-8"))["evidence"],
}
GPU_EVIDENCE["node"] = {
    **GPU_EVIDENCE["node"],
    "capture": json.loads(PCIE_CAPTURE.read_text(encoding="utf-8")),
}
EVIDENCE = {"gpu": GPU_EVIDENCE, "cpu": json.loads(CPU_EVIDENCE_FILE.read_text(encoding="utf-8"))}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-2, max_value=64)  # often the right type and range: gets past the checks
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["ok", "nccl", "gloo", "allreduce", "cpu-gloo", "sha256:" + "0" * 64, "", "\x1b[2J"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("fuzz")
    names = itertools.count()
    return lambda: folder / f"input-{next(names)}.json"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _replace(document: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return document


def _mutated_json(document: Any, data: st.DataObject) -> str:
    mutated = copy.deepcopy(document)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(mutated)
        path = paths[data.draw(st.integers(0, len(paths) - 1))]
        mutated = _replace(mutated, path, data.draw(json_values))
    return json.dumps(mutated)


def _mutated_bytes(text: str, seed: int, edits: int) -> bytes:
    rng = random.Random(seed)
    payload = bytearray(text.encode("utf-8"))
    for _ in range(edits):
        at = rng.randrange(len(payload))
        action = rng.choice(["flip", "delete", "insert", "truncate", "digits"])
        if action == "flip":
            payload[at] ^= 1 << rng.randrange(8)
        elif action == "delete":
            del payload[at]
        elif action == "insert":
            payload.insert(at, rng.randrange(256))
        elif action == "digits":  # numbers that overflow every size and count
            payload[at:at] = b"9" * rng.choice([20, 400, 5000])
        else:
            del payload[at:]
            break
    return bytes(payload)


def _assert_input_error_line(code: int, out: str, err: str, path: Path) -> None:
    assert code == 3, (code, err)
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"topo-gate: error: {path}: "), err


def _assert_decide_outcome(path: Path) -> None:
    code, out, err = _run(["decide", str(path), "--bootstrap", "100", "--json"])
    if code != 0:
        _assert_input_error_line(code, out, err, path)
        return
    document = json.loads(out)
    document.pop("notes")
    profile = Profile.from_dict(document)  # a profile the strict loader's checks accept
    check_semantics(profile)


def _assert_topo_outcome(path: Path) -> None:
    code, out, err = _run(["topo", "--from", str(path), "--json"])
    if code != 0:
        _assert_input_error_line(code, out, err, path)
        return
    report = json.loads(out)
    assert report["fingerprint"].startswith("sha256:") and report["hardware"]["gpu_count"] >= 0


@SETTINGS
@given(kind=st.sampled_from(sorted(EVIDENCE)), data=st.data())
def test_any_json_in_evidence_is_used_or_one_input_error(kind: str, data: st.DataObject, scratch) -> None:
    path = scratch()
    path.write_text(_mutated_json(EVIDENCE[kind], data), encoding="utf-8")
    _assert_decide_outcome(path)


@SETTINGS
@given(kind=st.sampled_from(sorted(EVIDENCE)), seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 6))
def test_any_bytes_of_evidence_are_used_or_one_input_error(kind: str, seed: int, edits: int, scratch) -> None:
    path = scratch()
    path.write_bytes(_mutated_bytes(json.dumps(EVIDENCE[kind], indent=1), seed, edits))
    _assert_decide_outcome(path)


@SETTINGS
@given(data=st.data())
def test_any_json_in_a_capture_is_used_or_one_input_error(data: st.DataObject, scratch) -> None:
    path = scratch()
    path.write_text(_mutated_json(CAPTURE, data), encoding="utf-8")
    _assert_topo_outcome(path)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 6))
def test_any_bytes_of_a_capture_are_used_or_one_input_error(seed: int, edits: int, scratch) -> None:
    path = scratch()
    path.write_bytes(_mutated_bytes(CAPTURE_FILE.read_text(encoding="utf-8"), seed, edits))
    _assert_topo_outcome(path)
