"""The A/B record's ``release``: the launcher release installed where CMD ran and the one the plan
modelled, the override; sealed with the rest, checked on load; records written before it still load."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_record import minimal_record
from test_record_semantics import consistent_record

from topo_gate.ab.record import RecordError, load_record, seal, write_record

RELEASE: dict[str, Any] = {
    "modelled": "0.33.0",
    "installed": "0.35.0",
    "flashinfer_modelled": "0.7.2.post1",
    "flashinfer_installed": "0.7.2.post1",
    "override": "0.35.0",
    "refusal": None,
    "read": "in the interpreter of /opt/venv/bin/vllm (/opt/venv/bin/python)",
}


def test_a_record_written_before_the_release_field_still_loads(tmp_path) -> None:
    record = consistent_record()
    assert "release" not in record
    assert load_record(write_record(tmp_path / "old.json", record)) == seal(record)


def test_the_release_is_sealed_and_loads_back(tmp_path) -> None:
    record = {**consistent_record(), "release": RELEASE}
    path = write_record(tmp_path / "ab.json", record)
    assert load_record(path)["release"] == RELEASE
    data = json.loads(path.read_text())
    data["release"]["override"] = None  # hiding the override after the fact
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match="digest mismatch"):
        load_record(path)


@pytest.mark.parametrize(
    ("release", "words"),
    [
        ("0.33.0", "release: unexpected value"),
        ({**RELEASE, "installed": 35}, "release.installed: unexpected value 35"),
        ({key: value for key, value in RELEASE.items() if key != "read"}, "release.read: missing"),
    ],
)
def test_a_malformed_release_is_refused_naming_the_field(tmp_path, release, words) -> None:
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(seal({**minimal_record(), "release": release})))
    with pytest.raises(RecordError, match=words) as caught:
        load_record(path)
    assert caught.value.kind == "invalid"


@pytest.mark.parametrize(
    ("release", "words"),
    [
        (
            {**RELEASE, "modelled": "0.34.0"},
            "release.modelled: '0.34.0' is not the launcher_version recorded",
        ),
        (
            {**RELEASE, "modelled": None, "refusal": "no model"},
            "release.override: an override with no release",
        ),
    ],
)
def test_a_release_that_contradicts_the_record_is_refused(tmp_path, release, words) -> None:
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(seal({**consistent_record(), "release": release})))
    with pytest.raises(RecordError, match=words):
        load_record(path)
