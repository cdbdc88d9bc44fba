"""One value from a file shown on a terminal (or in a report) is cut at ``MAX_SHOWN_CHARACTERS`` and the
rest counted (topo_gate/_terminal.py): a 12 MB skipped reason, one blank-free word, kept ``show``
busy for minutes while the renderer wrapped it. ``--json`` still carries the whole value.
``benchmarks/input_caps.py`` times ``show`` at the cap and past it."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo_gate._terminal import MAX_SHOWN_CHARACTERS, shown
from topo_gate.cli import main
from topo_gate.profile import compute_digest
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"


def test_the_cap() -> None:
    assert MAX_SHOWN_CHARACTERS == 4096


@pytest.mark.parametrize(
    ("length", "cut"),
    [(MAX_SHOWN_CHARACTERS - 1, 0), (MAX_SHOWN_CHARACTERS, 0), (MAX_SHOWN_CHARACTERS + 1, 1)],
)
def test_a_value_past_the_cap_is_cut_and_the_rest_counted(length: int, cut: int) -> None:
    text = "x" * length
    assert shown(text) == (
        text if not cut else "x" * MAX_SHOWN_CHARACTERS + f"... ({cut} more characters not shown)"
    )


def test_escapes_are_made_in_what_is_shown_only() -> None:
    text = "\x1b" * (MAX_SHOWN_CHARACTERS + 2)
    assert shown(text) == "\\x1b" * MAX_SHOWN_CHARACTERS + "... (2 more characters not shown)"


def test_show_cuts_a_huge_skipped_reason_and_json_keeps_it(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the reasons column
    reason = "y" * 200_000
    data = parse_yaml(PROFILE.read_text())
    data["skipped"] = [{"tp": 4, "reason": reason}]
    data.pop("digest")
    path = tmp_path / "big.yaml"
    path.write_text(to_yaml({**data, "digest": compute_digest(data)}))
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    # The cut reason twice (the decisions table, the launchers' outlook), and a few words of ours.
    assert 2 * MAX_SHOWN_CHARACTERS <= out.count("y") < 2 * MAX_SHOWN_CHARACTERS + 100
    assert "more characters not shown)" in " ".join(out.split())
    assert main(["show", str(path), "--json"]) == 0
    assert reason in capsys.readouterr().out
