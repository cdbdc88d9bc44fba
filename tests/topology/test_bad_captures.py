"""Malformed but parseable captures (data files in data/bad-captures/): one line naming the file and
the field, exit 3 from every command that reads ``--from``, never an internal error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.topology.capture import load_capture
from topo_gate.topology.errors import CaptureError

DATA = Path(__file__).parent / "data" / "bad-captures"
EXPECTED = json.loads((DATA / "expected-errors.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_load_capture_names_the_file_and_the_field(name: str) -> None:
    with pytest.raises(CaptureError) as raised:
        load_capture(DATA / name)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{DATA / name}: ")
    assert EXPECTED[name] in message


@pytest.mark.parametrize("command", ["topo", "check"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_commands_exit_3_in_one_line(name: str, command: str, capsys) -> None:
    path = DATA / name
    example = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.yaml"
    argv = (
        ["topo", "--from", str(path)] if command == "topo" else ["check", str(example), "--from", str(path)]
    )
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"topo-gate: error: {path}: ") and EXPECTED[name] in err


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "capture.json"
    os.mkfifo(fifo)  # opening it for reading would block forever without O_NONBLOCK
    with pytest.raises(CaptureError, match="is not a regular file, not a capture file"):
        load_capture(fifo)


def test_a_device_is_never_read(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="/dev/zero: is not a regular file, not a capture file"):
        load_capture("/dev/zero")
