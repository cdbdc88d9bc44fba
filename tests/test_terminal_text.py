"""Text read from files reaches the terminal escaped, never interpreted.

The hostile fixtures (tests/fixtures/hostile/) are valid, sealed inputs whose strings carry ESC and
OSC sequences, BEL, rich markup, an emoji code and a right-to-left override: in a profile's reason,
group class, GPU model, driver and skip reason; in a capture's GPU names, driver, hostname and
note; in evidence's group classes and skip reasons.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from topo_gate._terminal import shown
from topo_gate.cli import main

REPO = Path(__file__).resolve().parents[1]
HOSTILE = REPO / "tests" / "fixtures" / "hostile"
EXAMPLE = REPO / "profiles" / "examples" / "synthetic-h200x2.yaml"
RAW = ("\x1b", "\x07", "\u202e", "\U0001f18e")  # ESC, BEL, RLO, and the emoji ":ab:" would become


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    profile = str(HOSTILE / "profile-escapes.yaml")
    return {
        "show": ["show", profile],
        "diff": ["diff", str(EXAMPLE), profile],
        "topo": ["topo", "--from", str(HOSTILE / "capture-escapes.json")],
        "probe --replay": [
            "probe",
            "--replay",
            str(HOSTILE / "evidence-escapes.json"),
            "--out",
            str(tmp_path / "p.yaml"),
        ],
        "decide": ["decide", str(HOSTILE / "evidence-escapes.json"), "--bootstrap", "100"],
    }


@pytest.mark.parametrize("command", ["show", "diff", "topo", "probe --replay", "decide"])
def test_file_text_is_shown_escaped_and_literal(command: str, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough that no escape is split across lines
    code = main(_commands(tmp_path)[command])
    out, err = capsys.readouterr()
    assert code in (0, 1), err  # diff exits 1: the decisions differ
    for raw in RAW:
        assert raw not in out + err
    assert "\\x1b[2J\\x1b]0;owned\\x07[red]hidden[/red] :ab: \\u202e" in out


def test_an_error_line_carries_no_raw_control_character(tmp_path: Path, capsys) -> None:
    path = tmp_path / "evil\x1b[2Jname.yaml"
    assert main(["validate", str(path)]) == 3
    _, err = capsys.readouterr()
    assert "\x1b" not in err and err == f"topo-gate: error: {tmp_path}/evil\\x1b[2Jname.yaml: no such file\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain [0, 1] text", "plain [0, 1] text"),
        ("a\x1b[31mred", "a\\x1b[31mred"),
        ("line\nbreak\ttab\rreturn", "line\\x0abreak\\x09tab\\x0dreturn"),
        ("c1 \x9b csi and \x85 nel", "c1 \\x9b csi and \\x85 nel"),
        ("bidi \u202e and \u2066", "bidi \\u202e and \\u2066"),
        ("GPU \u00e9 \u4e2d", "GPU \u00e9 \u4e2d"),  # printable non-ASCII stays as it is
    ],
)
def test_shown_escapes_exactly_the_control_characters(text: str, expected: str) -> None:
    assert shown(text) == expected


def test_a_file_name_is_shown_escaped_in_every_line_about_it(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # one line per message: the name is not wrapped apart
    named = tmp_path / "node\x1b]0;owned\x07.yaml"
    named.write_bytes(EXAMPLE.read_bytes())
    escaped = f"{tmp_path}/node\\x1b]0;owned\\x07.yaml"
    assert main(["validate", str(named)]) == 0
    assert main(["diff", str(named), str(EXAMPLE)]) == 0
    assert main(["recommend", str(named), "--tp", "2", "--launcher", "vllm"]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert out.startswith(f"OK {escaped}: schema v1.3")
    assert f"{escaped} and " in out  # diff: "Same decisions: A and B ..."
