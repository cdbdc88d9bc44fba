"""A ``COLUMNS`` or ``LINES`` that is no terminal size is ignored: the output is printed, as wide as
the terminal (80 columns when there is none), never empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo_gate.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "profiles" / "examples" / "synthetic-h200x2.yaml"


@pytest.mark.parametrize("columns", ["0", "-5", "abc", "\u0668\u0660", "99999999999999999999", ""])
@pytest.mark.parametrize("command", [["show", str(EXAMPLE)], ["validate", str(EXAMPLE)]])
def test_a_columns_that_is_no_width_prints_as_80(
    columns: str, command: list[str], capsys, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("LINES", "0")
    assert main(command) == 0
    out = capsys.readouterr().out
    assert out.strip()
    if command[0] == "show":  # rich lays it out to the width (validate prints one plain line)
        assert max(len(line) for line in out.splitlines()) <= 80


def test_a_real_width_is_kept(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["show", str(EXAMPLE)]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 60
