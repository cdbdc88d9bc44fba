"""Each rule reads the same on every surface: a CPU-harness profile's gloo rule is its baseline (no
1.00x "win") and its ``nccl`` rules name no backend that machine has; ``summary.md`` gives the reason's
first clause on one line (what decided the range), ``report.html`` that clause first and the detail
after it."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.profile import load_profile
from topo_gate.report.html_page import _decision_table
from topo_gate.report.rule_words import backend_words, one_line_reason, reason_parts, shows_speedup

REPO = Path(__file__).resolve().parents[2]
CPU_EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
RUN1 = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cpu") / "cpu.yaml"
    assert main(["decide", str(CPU_EVIDENCE), "--out", str(out)]) == 0
    return out


def run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_the_words_of_one_rule() -> None:
    assert backend_words("nccl", cpu=True) == "not measured"
    assert backend_words("gloo", cpu=True) == "gloo (baseline)"
    assert backend_words("nccl", cpu=False) == "nccl"
    assert backend_words("pcie_ipc", cpu=True) == "pcie_ipc"
    assert reason_parts("a; b; c") == ("a", "b; c")
    assert one_line_reason(None) == "" and one_line_reason("only") == "only"


def test_a_cpu_profile_has_no_winner_at_1x_and_no_nccl(cpu_profile, capsys) -> None:
    profile = load_profile(cpu_profile)
    gloo = profile.decisions[0].rules[0]
    assert gloo.backend == "gloo" and gloo.speedup == 1.0  # what the schema stores ...
    assert not shows_speedup(gloo, cpu=True) and shows_speedup(gloo, cpu=False)  # ... and never shows
    for argv in (
        ["show", str(cpu_profile)],
        ["decide", str(CPU_EVIDENCE), "--out", str(cpu_profile.with_name("again.yaml"))],
    ):
        out = run(capsys, *argv)
        assert "1.00x" not in out and "gloo (baseline)" in out, out
        assert not re.search(r"[│|] +nccl +[│|]", out), out
        assert "keeps NCCL" not in out and "GPU model not recorded" not in out


def test_a_cpu_profile_in_summary_md(cpu_profile, tmp_path, capsys) -> None:
    assert main(["report", str(cpu_profile), "--out", str(tmp_path / "r"), "--format", "md"]) == 0
    capsys.readouterr()
    summary = (tmp_path / "r" / "summary.md").read_text()
    rows = [line for line in summary.splitlines() if line.startswith("| ") and "allreduce" in line]
    assert rows and all("1.00x" not in row and " nccl " not in row for row in rows)
    assert any("| gloo (baseline) |" in row for row in rows)
    assert any("| not measured |" in row for row in rows)


def test_a_reason_reads_as_its_first_clause_on_one_line() -> None:
    """What summary.md's why-cell shows (tests/golden pins the bundled profile's summary.md whole)."""
    fused = load_profile(RUN1).decisions[1].rules[0]
    assert one_line_reason(fused.reason) == (
        "fusion off: pcie_ipc + norm is faster at 28 KiB-56 KiB (2 sizes), within 5% of fused at 112 KiB"
    )


def test_report_html_puts_the_first_clause_first_and_the_detail_after() -> None:
    entry = load_profile(RUN1).decisions[1]
    html = _decision_table([("run1", entry)], cpu=False)
    headline, detail = reason_parts(entry.rules[0].reason)
    assert f'<td class="why"><strong>{escape(headline)}</strong>; {escape(detail[:40])}' in html
    assert '<td class="backend">nccl</td>' in html
