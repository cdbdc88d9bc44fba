"""Capture files: round trip, and one-line CaptureError on every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.topology.capture import capture_from_dict, capture_to_dict, load_capture, save_capture
from topo_gate.topology.errors import CaptureError


def test_save_then_load_gives_the_same_capture(capture_path: Path, tmp_path: Path) -> None:
    capture = load_capture(capture_path)
    save_capture(capture, tmp_path / "copy.json")
    assert load_capture(tmp_path / "copy.json") == capture


def test_fixture_files_are_in_the_writers_layout(capture_path: Path) -> None:
    # Fixtures are what save_capture writes, so a diff of two captures reads line by line.
    text = capture_path.read_text()
    assert json.loads(text) == capture_to_dict(load_capture(capture_path))


def test_hand_written_captures_say_so(capture_path: Path) -> None:
    capture = load_capture(capture_path)
    if ".synthetic." in capture_path.name:
        assert capture.synthetic and capture.note and capture.note.startswith("Hand-written:")
    else:
        assert not capture.synthetic


def _base() -> dict:
    from capture_paths import CAPTURES

    return json.loads((CAPTURES / "l40s-no-p2p-x4.synthetic.json").read_text())


def _set(path: str, value: object):
    def mutate(data: dict) -> dict:
        *parents, last = path.split("/")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is _DELETE:
            del node[int(last) if isinstance(node, list) else last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return data

    return mutate


_DELETE = object()

BAD = [
    ("format of a newer major", _set("format", "topo-gate/capture/v2"), "not a topo-gate capture"),
    ("a profile, not a capture", _set("format", "topo-gate/profile/v1"), "not a topo-gate capture"),
    ("no gpus", _set("gpus", _DELETE), "gpus: missing"),
    ("gpus not a list", _set("gpus", {"0": 1}), "gpus: expected a list"),
    (
        "unknown reason",
        _set("gpus/0/numa_node", {"unknown": "bad_luck"}),
        "gpus[0].numa_node.unknown: expected one of",
    ),
    (
        "string for a number",
        _set("gpus/1/memory_total", "48 GB"),
        "gpus[1].memory_total: expected an integer",
    ),
    ("bool for a number", _set("gpus/1/pcie_gen_max", True), "gpus[1].pcie_gen_max: expected an integer"),
    ("pair index out of range", _set("pairs/0/b", 9), "pairs[0].b: expected an integer in 0..3"),
    (
        "bad cluster uuid",
        _set("gpus/0/fabric", {"state": 3, "status": 0, "clique": 0, "cluster_uuid": "xyz"}),
        "gpus[0].fabric.cluster_uuid: expected 32 lowercase hex digits",
    ),
    ("gpu indices out of order", _set("gpus/0/index", 3), "indices must be 0..3 in order"),
    ("missing pair answer", _set("pairs/2/p2p_write", _DELETE), "pairs[2].p2p_write: missing"),
    ("incomplete capture", _set("incomplete", "nvmlDeviceGetGpuFabricInfoV(gpu 1)"), "incomplete capture"),
]


@pytest.mark.parametrize(("mutate", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_garbled_capture_is_one_line_naming_the_spot(tmp_path: Path, mutate, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(mutate(_base())))
    with pytest.raises(CaptureError) as error:
        load_capture(path)
    assert message in str(error.value) and str(path) in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe garbage", "not UTF-8"),
        (b'{"format": ', "not JSON"),
        (b"[1, 2]", "top level: expected an object"),
    ],
)
def test_unreadable_bytes(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CaptureError, match=message):
        load_capture(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="no such file"):
        load_capture(tmp_path / "nope.json")


def _assert_refused_at_or_round_trips(data: dict, *where: str) -> None:
    """A refusal names the field that was changed (or, for the GPU list, the pairs that index it); an
    accepted capture is the same after a round trip."""
    try:
        capture = capture_from_dict(data)
    except CaptureError as error:
        assert any(field in str(error) for field in where), error
    else:
        assert capture_from_dict(capture_to_dict(capture)) == capture


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(["system", "gpus", "pairs", "format"]), replacement=json_values)
def test_any_json_in_any_section_is_a_capture_or_a_capture_error(key: str, replacement: object) -> None:
    data = _base()
    data[key] = replacement
    _assert_refused_at_or_round_trips(data, key, *(["pairs"] if key == "gpus" else []))


@settings(max_examples=150, deadline=None)
@given(
    field=st.sampled_from(["numa_node", "cuda_cc", "fabric", "nvlinks", "mig_devices", "bus_id"]),
    replacement=json_values,
)
def test_any_json_in_a_gpu_field_is_a_capture_or_a_capture_error(field: str, replacement: object) -> None:
    data = _base()
    data["gpus"][2][field] = replacement
    _assert_refused_at_or_round_trips(data, field)
