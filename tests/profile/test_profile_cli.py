"""topo-gate validate / show / diff: output, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from topo_gate._units import speedup_ci_text
from topo_gate.cli import main
from topo_gate.profile import load_profile


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _first_rule_text(example_path: Path) -> str:
    rule = load_profile(example_path).decisions[0].rules[0]
    return f"speedup: {rule.speedup}\n    ci: [{rule.ci[0]}, "


@pytest.fixture
def hand_edited(example_path: Path, tmp_path: Path) -> Path:
    # A deliberate edit its own price table allows: claim less than measured (CI widened to match).
    path = tmp_path / "edited.yaml"
    text = example_path.read_text()
    assert text.count(_first_rule_text(example_path)) == 1
    path.write_text(
        "# my notes\n" + text.replace(_first_rule_text(example_path), "speedup: 1.9\n    ci: [1.8, ")
    )
    return path


class TestValidate:
    def test_valid_profile(self, capsys, example_path):
        code, out, err = run(capsys, "validate", str(example_path))
        assert (code, err) == (0, "")
        assert out == f"OK {example_path}: schema v1.3, 2 decisions, fingerprint sha256:39a39c834186...\n"

    def test_several_profiles_each_reported_worst_exit_code(
        self, capsys, example_path, hand_edited, tmp_path
    ):
        tampered = f"topo-gate: error: {hand_edited}: digest: the content hashes to "
        code, out, err = run(capsys, "validate", str(example_path), str(hand_edited))
        assert code == 1 and out.startswith(f"OK {example_path}: ") and out.count("\n") == 1
        assert err.startswith(tampered) and err.count("\n") == 1
        missing = tmp_path / "missing.yaml"
        code, out, err = run(capsys, "validate", str(missing), str(hand_edited), str(example_path))
        assert code == 3 and out.startswith(f"OK {example_path}: ") and out.count("\n") == 1
        first, second = err.splitlines()
        assert first == f"topo-gate: error: {missing}: no such file" and second.startswith(tampered)

    def test_several_valid_profiles(self, capsys, example_path, write_profile, example_data):
        other = write_profile(example_data, name="other.yaml")
        code, out, err = run(capsys, "validate", str(example_path), str(other))
        assert (code, err) == (0, "") and [line.split(":")[0] for line in out.splitlines()] == [
            f"OK {example_path}",
            f"OK {other}",
        ]

    def test_help_teaches_usage(self, capsys):
        code, out, _ = run(capsys, "validate", "--help")
        assert code == 0
        assert "topo-gate validate node.yaml" in out and "Exit codes: 0 valid" in out

    def test_reseal_after_a_deliberate_edit(self, capsys, hand_edited):
        assert run(capsys, "validate", str(hand_edited))[0] == 1
        code, out, err = run(capsys, "validate", "--reseal", str(hand_edited))
        assert code == 0 and out.startswith("OK ") and err == f"resealed {hand_edited}\n"
        assert load_profile(hand_edited).decisions[0].rules[0].speedup == 1.9

    def test_reseal_adds_a_missing_digest(self, capsys, example_path, tmp_path):
        path = tmp_path / "p.yaml"
        path.write_text(example_path.read_text().rsplit("\ndigest: sha256:", 1)[0] + "\n")  # the seal only
        assert run(capsys, "validate", "--reseal", str(path))[0] == 0
        assert load_profile(path).digest == load_profile(example_path).digest

    def test_reseal_leaves_a_valid_file_alone(self, capsys, example_path, tmp_path):
        path = tmp_path / "p.yaml"
        path.write_text("# keep me\n" + example_path.read_text())
        assert run(capsys, "validate", "--reseal", str(path))[0] == 0
        assert path.read_text().startswith("# keep me\n")

    def test_reseal_does_not_bless_an_invalid_profile(self, capsys, tmp_path, example_path):
        path = tmp_path / "p.yaml"
        original = example_path.read_text().replace("backend: trtllm_oneshot", "backend: warp_drive")
        path.write_text(original)
        code, _, err = run(capsys, "validate", "--reseal", str(path))
        assert code == 1 and "unknown backend 'warp_drive'" in err
        assert path.read_text() == original


class TestShow:
    def test_tables(self, capsys, example_path):
        code, out, _ = run(capsys, "show", str(example_path))
        assert code == 0
        rule = load_profile(example_path).decisions[0].rules[0]
        for text in (
            "SYNTHETIC",
            "2x NVIDIA H200, nvswitch",
            "TP 2 / allreduce / nvswitch",
            "<= 448 KiB",
            speedup_ci_text(rule.speedup, rule.ci),
            "trtllm_fused_oneshot",
            "> 7 MiB",
            "TP 4: node has 2 usable GPUs",
            "Price table: 3 backends x 12 sizes (14 KiB - 28 MiB), 34 cells priced",
        ):
            assert text in out, text

    def test_json(self, capsys, example_path):
        code, out, _ = run(capsys, "show", "--json", str(example_path))
        document = json.loads(out)
        assert code == 0 and document["digest_ok"] is True
        loaded = load_profile(example_path)
        assert document["decisions"] == [entry.to_dict() for entry in loaded.decisions]
        assert document["measurements"] == [table.to_dict() for table in loaded.measurements]

    def test_a_hand_edit_is_shown_with_a_warning(self, capsys, hand_edited):
        code, out, _ = run(capsys, "show", str(hand_edited))
        assert code == 0 and "launchers will ignore this profile" in out and "1.90x (CI 1.80-" in out

    def test_unreadable(self, capsys, tmp_path):
        code, out, err = run(capsys, "show", str(tmp_path / "nope.yaml"))
        assert (code, out) == (3, "") and err == f"topo-gate: error: {tmp_path / 'nope.yaml'}: no such file\n"


class TestDiff:
    def test_same_decisions(self, capsys, example_path):
        code, out, _ = run(capsys, "diff", str(example_path), str(example_path))
        assert code == 0 and "Same decisions" in out

    def test_changed_ranges(self, capsys, example_path, example_data, write_profile):
        example_data["decisions"][0]["rules"][0]["max_bytes"] = 256 * 1024
        changed = write_profile(example_data)
        code, out, _ = run(capsys, "diff", "--json", str(example_path), str(changed))
        assert code == 1
        assert json.loads(out)["changes"] == [
            {
                "tp": 2,
                "pattern": "allreduce",
                "group_class": "nvswitch",
                "min_bytes": 256 * 1024,
                "max_bytes": 448 * 1024,
                "before": "trtllm_oneshot",
                "after": "trtllm_twoshot",
                "note": None,
            }
        ]
        code, out, _ = run(capsys, "diff", str(example_path), str(changed))
        assert code == 1 and "> 256 KiB, <= 448 KiB" in out

    def test_invalid_profile_exits_3(self, capsys, example_path, tmp_path):
        bad = tmp_path / "bad.yaml"
        bad.write_text("- not a profile\n")
        code, _, err = run(capsys, "diff", str(example_path), str(bad))
        assert code == 3 and err.count("\n") == 1


def test_real_entry_point_prints_one_line_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe not utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "topo_gate", "validate", str(bad)], capture_output=True, text=True
    )
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr == f"topo-gate: error: {bad}: not UTF-8 text (byte 0: invalid start byte)\n"


class TestPriceTables:
    """show and diff summarise the price tables (schema v1.3); they never dump them."""

    RUNS = [
        Path(__file__).resolve().parents[2] / "profiles" / "h200-x2" / f"h7168-run{i}.yaml" for i in (1, 2)
    ]

    def test_show_gives_one_short_line_per_table(self, capsys, monkeypatch):
        monkeypatch.setenv("COLUMNS", "200")
        code, out, _ = run(capsys, "show", str(self.RUNS[0]))
        lines = [line.strip() for line in out.splitlines() if line.startswith("Price table")]
        assert code == 0 and len(lines) == 2
        assert lines[0].startswith("Price table: 10 backends x 14 sizes (14 KiB - 112 MiB), ")
        assert "no price: pcie" not in lines[0]  # measured (slow) at every size, not refused

    def test_diff_summarises_how_the_prices_moved(self, capsys):
        code, out, _ = run(capsys, "diff", "--json", *map(str, self.RUNS))
        changes = json.loads(out)["measurement_changes"]
        assert code == 1 and [c["change"] for c in changes] == ["changed", "changed"]
        first = changes[0]
        assert (first["tp"], first["pattern"], first["backends_added"], first["sizes_added"]) == (
            2,
            "allreduce",
            [],
            [],
        )
        move = first["largest_move"]
        assert move["before_us"] != move["after_us"] and first["beyond_ci"] > 0
        code, out, _ = run(capsys, "diff", *map(str, self.RUNS))
        assert "Price table TP 2 / allreduce / nvswitch: " in out and "cells moved beyond their CIs" in out

    def test_a_table_one_profile_lacks_is_added_or_removed(
        self, capsys, example_path, write_profile, example_data
    ):
        without = write_profile(example_data)  # the example without its price table
        code, out, _ = run(capsys, "diff", "--json", str(without), str(example_path))
        assert code == 0  # the same decisions: prices alone never change the exit code
        assert [c["change"] for c in json.loads(out)["measurement_changes"]] == ["added", "added"]
        code, out, _ = run(capsys, "diff", "--json", str(example_path), str(without))
        assert [c["change"] for c in json.loads(out)["measurement_changes"]] == ["removed", "removed"]
        assert run(capsys, "diff", str(example_path), str(example_path))[1].count("Price table") == 0
