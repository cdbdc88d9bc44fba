"""Every malformed profile: `validate` fails with one line and the right exit code, `load_profile`
raises the right error naming the problem and where, and `gate()` answers NCCL with that reason.

Cases are data files listed in malformed/cases.yaml; the ones too big or too odd to commit are built
here into tmp_path.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import topo_gate
from topo_gate.cli import main
from topo_gate.profile import errors

MALFORMED = Path(__file__).resolve().parent / "malformed"
CASES = yaml.safe_load((MALFORMED / "cases.yaml").read_text(encoding="utf-8"))


def _alias_bomb(path: Path) -> None:
    # "Billion laughs": 9 levels of 9 aliases each would expand to 9**9 strings.
    lines = ['a0: &a0 "lol"']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path.write_text("\n".join(lines) + "\n")


def _twenty_megabytes(path: Path) -> None:
    path.write_text("# padding\n" * (2 * 1024 * 1024))


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(0).randbytes(4096))


def _deep_nesting(path: Path) -> None:
    path.write_text("decisions: " + "[" * 40 + "]" * 40 + "\n")


def _very_deep_nesting(path: Path) -> None:
    # Deeper than libyaml's own limit (1000), which then answers before our composer does.
    path.write_text("decisions: " + "[" * 100_000 + "]" * 100_000 + "\n")


def _fifo(path: Path) -> None:
    os.mkfifo(path)  # opening it for reading would block a launcher forever


def _missing(path: Path) -> None:
    pass


GENERATED: list[tuple[str, Callable[[Path], None], int, type, str]] = [
    ("alias-bomb", _alias_bomb, 3, errors.ProfileUnreadable, "aliases (*name) are not allowed"),
    ("twenty-megabytes", _twenty_megabytes, 3, errors.ProfileUnreadable, "larger than 16 MiB"),
    ("random-bytes", _random_bytes, 3, errors.ProfileUnreadable, "not UTF-8 text (byte 0"),
    ("deep-nesting", _deep_nesting, 3, errors.ProfileUnreadable, "nested deeper than 32 levels"),
    ("very-deep-nesting", _very_deep_nesting, 3, errors.ProfileUnreadable, "not valid YAML: line 1"),
    ("fifo", _fifo, 3, errors.ProfileUnreadable, "is not a regular file"),
    ("missing", _missing, 3, errors.ProfileUnreadable, "no such file"),
]


def _all_cases() -> list:
    committed = [
        pytest.param(MALFORMED / c["file"], c["exit"], getattr(errors, c["raises"]), c["error"], id=c["file"])
        for c in CASES
    ]
    generated = [
        pytest.param(make, code, error, fragment, id=name) for name, make, code, error, fragment in GENERATED
    ]
    return committed + generated


@pytest.fixture
def case_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    source = request.param
    if isinstance(source, Path):
        return source
    path = tmp_path / "profile.yaml"
    source(path)
    return path


def test_committed_cases_cover_every_file() -> None:
    listed = {case["file"] for case in CASES}
    on_disk = {path.name for path in MALFORMED.glob("*.yaml")} - {"cases.yaml"}
    assert listed == on_disk
    assert len(CASES) + len(GENERATED) >= 25


@pytest.mark.parametrize(
    ("case_path", "exit_code", "error_type", "fragment"), _all_cases(), indirect=["case_path"]
)
class TestMalformed:
    def test_validate_fails_in_one_line(
        self, case_path, exit_code, error_type, fragment, capsys, monkeypatch, tmp_path
    ):
        monkeypatch.chdir(tmp_path)  # a `touch` smuggled in a python tag would land here
        assert main(["validate", str(case_path)]) == exit_code
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1, err
        assert err.startswith(f"topo-gate: error: {case_path}: ")
        assert fragment in err
        assert "Traceback" not in err
        assert not (tmp_path / "TOPO_GATE_PWNED").exists()

    def test_load_profile_raises_typed_error(self, case_path, exit_code, error_type, fragment):
        with pytest.raises(error_type) as raised:
            topo_gate.load_profile(case_path)
        assert fragment in str(raised.value)  # how fast they fail: benchmarks/fail_fast.py

    def test_recommend_changes_nothing_with_the_reason(
        self, case_path, exit_code, error_type, fragment, capsys
    ):
        # An unreadable profile measured nothing this launch can use: the launcher keeps its own defaults.
        assert main(["recommend", str(case_path), "--tp", "2", "--launcher", "vllm", "--format", "json"]) == 0
        out, err = capsys.readouterr()
        plan = json.loads(out)
        assert plan["fallback"] is True and fragment in plan["reason"]
        assert plan["args"] == [] and plan["env"] == {}
        assert err.startswith("topo-gate: vLLM ") and "FALLBACK (launcher-default)" in err

    def test_recommend_forces_nccl_when_asked(self, case_path, exit_code, error_type, fragment, capsys):
        argv = ["recommend", str(case_path), "--tp", "2", "--launcher", "vllm", "--format", "json"]
        assert main([*argv, "--fallback", "nccl"]) == 0
        out, err = capsys.readouterr()
        plan = json.loads(out)
        assert plan["fallback"] is True and fragment in plan["reason"]
        assert "--disable-custom-all-reduce" in plan["args"]
        assert "FALLBACK (nccl)" in err

    def test_gate_answers_nccl_with_the_reason(self, case_path, exit_code, error_type, fragment):
        decision = topo_gate.gate(case_path, tp=2, nbytes=1024)
        assert decision.backend == "nccl"
        assert decision.fallback
        assert decision.rules == ()
        assert fragment in decision.reason
        assert str(case_path) in decision.reason
