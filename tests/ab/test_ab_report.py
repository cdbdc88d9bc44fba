"""An A/B record in ``topo-gate report`` (next to the profile it validated) and in ``show``; text
from the record stays inert in Markdown, HTML and on the terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ab_helpers import DATA

from topo_gate.ab.record import load_record, write_record
from topo_gate.cli import main
from topo_gate.report.ab_report import AbSource, ab_figure_spec

pytestmark = pytest.mark.slow

STEADY = [100.0, 100.0, 101.0, 102.0, 99.0, 100.0]
HOSTILE = ["<script>alert(1)</script>", "[red]loud[/red]", "bell\x1b[2J", "a|b"]
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")  # a CommonMark code span: equal fences, one line


@pytest.fixture
def record_path(bench, capsys, tmp_path, sglang_node) -> Path:
    markers, _ = sglang_node.arm_markers()
    bench.scenario(
        arms=markers,
        template=str(DATA / "sglang-one-batch.jsonl"),
        set=["median_decode_throughput"],
        result_flag="--result-filename",
        values={"default": STEADY, "plan": [v * 1.1 for v in STEADY]},
        exit={"plan": {"3": 2}},
    )
    cmd = [*bench.module("sglang.benchmark.one_batch"), "--model-path", "M", "--tp-size", "2"]
    out = tmp_path / "ab-run.json"
    assert main(["ab", *sglang_node.args(), "--json", "--out", str(out), "--", *cmd]) == 0
    capsys.readouterr()
    return out


def test_the_figure_spec_has_every_measured_run_and_the_failed_one(record_path) -> None:
    spec = ab_figure_spec(AbSource("ab-run", record_path, load_record(record_path)))
    assert [arm.arm for arm in spec.arms] == ["default", "plan"]
    default, plan = spec.arms
    assert default.points == tuple(zip(range(1, 6), STEADY[1:], strict=True)) and default.failed == ()
    assert [r for r, _ in plan.points] == [1, 2, 4, 5] and plan.failed == ((3, "failed"),)
    assert plan.median == pytest.approx(110.0)  # of 110, 111.1, 108.9, 110
    assert spec.notes[0].startswith("plan/default 1.1") and spec.notes[0].endswith("4 pairs: win")
    assert spec.name == "ab-ab-run" and "higher is better" in spec.ylabel


def test_report_puts_the_record_next_to_the_profile_it_validated(
    record_path, capsys, tmp_path, sglang_node
) -> None:
    out = tmp_path / "r"
    profile = str(sglang_node.profile)
    assert main(["report", profile, str(record_path), "--out", str(out), "--format", "md"]) == 0
    summary = (out / "summary.md").read_text()
    assert "## A/B runs" in summary and f"validates input {sglang_node.profile.stem} (same digest)" in summary
    assert "| `plan/default` | `1.1000 (1.1000-1.1000)` | `4` | `win` |" in summary
    alone = tmp_path / "alone"
    assert main(["report", str(record_path), "--out", str(alone), "--format", "md"]) == 0
    assert "not among the inputs" in (alone / "summary.md").read_text()
    capsys.readouterr()


@pytest.mark.slow
def test_report_draws_the_arms_reproducibly(record_path, capsys, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        assert main(["report", str(record_path), "--out", str(folder), "--format", "png,html"]) == 0
    png = (first / "figures" / "ab-ab-run.png").read_bytes()
    assert png.startswith(b"\x89PNG") and png == (second / "figures" / "ab-ab-run.png").read_bytes()
    assert "data:image/png;base64," in (first / "report.html").read_text()
    capsys.readouterr()


def test_two_records_whose_names_differ_only_in_spelling_get_a_figure_each(
    record_path, capsys, tmp_path
) -> None:
    pytest.importorskip("matplotlib")
    spaced, dashed = tmp_path / "AB x.json", tmp_path / "ab-x.json"
    for path in (spaced, dashed):
        path.write_bytes(record_path.read_bytes())
    out = tmp_path / "r"
    assert main(["report", str(spaced), str(dashed), "--out", str(out), "--format", "png,md"]) == 0
    links = re.findall(r"\[samples per arm\]\((figures/[^)]+)\)", (out / "summary.md").read_text())
    assert len(links) == len(set(links)) == 2
    assert all((out / link).is_file() for link in links)
    assert "figures/ab-ab-x.png" in links  # a name already a clean file stem keeps it
    capsys.readouterr()


def test_text_from_a_record_stays_inert(record_path, capsys, tmp_path) -> None:
    record = load_record(record_path)
    record["command"] = [*record["command"], *HOSTILE]
    record["runs"][0]["tail"] = HOSTILE
    record["runs"][0]["status"], record["runs"][0]["value"] = "failed", None
    write_record(record_path, record)
    out = tmp_path / "r"
    assert main(["report", str(record_path), "--out", str(out), "--format", "md,html"]) == 0
    html, markdown = (out / "report.html").read_text(), (out / "summary.md").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # Markdown shows a code span's content as text: the record's text reaches summary.md only inside one
    assert "<script>alert(1)</script>" in markdown and "<script>" not in CODE_SPAN.sub("", markdown)
    assert "a\\|b" in markdown
    capsys.readouterr()
    assert main(["show", str(record_path)]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\\x1b" in shown and "[red]loud[/red]" in shown


def test_report_refuses_an_edited_record(record_path, capsys, tmp_path) -> None:
    data = json.loads(record_path.read_text())
    data["verdict"] = "regression"
    record_path.write_text(json.dumps(data))
    # README: 1 for an invalid or tampered record, 3 for one that cannot be read.
    assert main(["report", str(record_path), "--out", str(tmp_path / "r"), "--format", "md"]) == 1
    assert "digest mismatch" in capsys.readouterr().err


def test_show_fits_80_columns(record_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["show", str(record_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if len(line) > 80] == []
    assert not any("\u2026" in line for line in lines)  # no number cut to an ellipsis
