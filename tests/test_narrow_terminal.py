"""At 80 columns: --help is wrapped by click (never hard-wrapped past the edge), tables stack or
split their columns, and no number is ever cut to an ellipsis. Also: the README's exit-code table
lists every code the CLI can give, and every code a command's --help names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from topo_gate._units import ci_text
from topo_gate.cli import COMMANDS, main
from topo_gate.cli._errors import ExitCode

REPO = Path(__file__).resolve().parents[1]
CAPTURES = REPO / "tests" / "fixtures" / "captures"
EXAMPLE = REPO / "profiles" / "examples" / "synthetic-h200x2.yaml"
H200_EVIDENCE = REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json"
ELLIPSIS = "\u2026"


@pytest.fixture
def eighty_columns(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # click and rich both size themselves from it


def _lines(capsys) -> list[str]:
    out, err = capsys.readouterr()
    return (out + err).splitlines()


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_fits_80_columns(command: str, capsys, eighty_columns) -> None:
    assert main([*command.split(), "--help"]) == 0
    lines = _lines(capsys)
    too_wide = [line for line in lines if len(line) > 80]
    assert too_wide == []


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["show", str(EXAMPLE)], id="show"),
        pytest.param(["topo", "--from", str(CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json")], id="topo-x8"),
        pytest.param(["topo", "--from", str(CAPTURES / "a100-mig-x2.synthetic.json")], id="topo-mig"),
        pytest.param(["decide", str(H200_EVIDENCE), "--bootstrap", "200"], id="probe-summary"),
    ],
)
def test_tables_fit_80_columns_without_ellipsis(argv: list[str], capsys, eighty_columns) -> None:
    assert main(argv) == 0
    lines = _lines(capsys)
    assert [line for line in lines if len(line) > 80] == []
    assert not any(ELLIPSIS in line for line in lines)


def test_show_prints_the_whole_fingerprint_at_80_columns(capsys, eighty_columns) -> None:
    assert main(["show", str(EXAMPLE)]) == 0
    text = "".join(line.strip(" ") for line in _lines(capsys))
    assert "sha256:39a39c834186" in text
    fingerprint = re.search(r"sha256:[0-9a-f]{64}", re.sub(r"\s+", "", text))
    assert fingerprint is not None


def test_probe_summary_shows_every_ci_whole_at_80_columns(capsys, eighty_columns) -> None:
    decide = ["decide", str(H200_EVIDENCE), "--bootstrap", "200"]
    assert main([*decide, "--json"]) == 0
    profile = json.loads(capsys.readouterr().out)
    # One CI per fast-path range, as the same decision derives it.
    expected = [
        f"(CI {ci_text(rule['ci'])})"
        for decision in profile["decisions"]
        for rule in decision["rules"]
        if rule["ci"] is not None
    ]
    assert expected
    assert main(decide) == 0
    out = "\n".join(_lines(capsys))
    assert re.findall(r"\(CI \d+\.\d\d-\d+\.\d\d\)", out) == expected


def _readme_exit_codes() -> set[int]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Exit codes", 1)[1].split("\n## ", 1)[0]
    return {int(code) for code in re.findall(r"^\| (\d+) \|", section, flags=re.MULTILINE)}


def test_readme_lists_every_exit_code_the_cli_has() -> None:
    assert _readme_exit_codes() == {int(code) for code in ExitCode}


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_exit_code_a_help_names_is_in_the_readme(command: str, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main([*command.split(), "--help"]) == 0
    help_text = " ".join(_lines(capsys))
    named = help_text.split("Exit codes", 1)[1] if "Exit codes" in help_text else ""
    # A code follows "Exit codes:" or a separator: "0 ok, 2 usage; 8 output", "126/127 (exec)".
    found = re.findall(r"(?:^|[:,;]) ?(\d{1,3})(?:/(\d{3}))? ", named)
    codes = {int(code) for pair in found for code in pair if code}
    assert codes, "every --help names its exit codes"
    assert codes <= _readme_exit_codes()
