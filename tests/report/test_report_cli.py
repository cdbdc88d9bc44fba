"""``topo-gate report`` as a user runs it: real evidence in, real files out."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from report_inputs import PROFILE1, RUN1, RUN2

from topo_gate._units import human_bytes
from topo_gate.cli import main
from topo_gate.probe import DecideSettings, replay
from topo_gate.profile import load_profile
from topo_gate.profile.io import dump_profile
from topo_gate.report.figures import figure_specs
from topo_gate.report.render import render_png
from topo_gate.report.sources import load_sources

pytestmark = pytest.mark.slow

# The bundled runs carry in-context graphs and transitions: four figures per pattern.
FIGURES = sorted(
    f"{kind}-tp2-nvswitch-{pattern}.png"
    for pattern in ("allreduce", "allreduce_rmsnorm")
    for kind in ("latency", "speedup", "context", "transition")
)
PROFILES = [load_profile(PROFILE1), load_profile(PROFILE1.with_name("h7168-run2.yaml"))]
FIRST_RULE = PROFILES[0].find(2, "allreduce", "nvswitch").rules[0]  # pcie_ipc at the smallest sizes
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WITHOUT_MATPLOTLIB = (
    "import sys; sys.modules['matplotlib'] = None  # import matplotlib now raises ImportError\n"
    "from topo_gate.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.fixture(scope="module")
def both_runs_report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "r"
    assert main(["report", str(RUN1), str(RUN2), "--out", str(out)]) == 0
    return out


def test_writes_the_page_the_summary_and_one_png_per_figure(both_runs_report: Path) -> None:
    files = sorted(str(p.relative_to(both_runs_report)) for p in both_runs_report.rglob("*") if p.is_file())
    assert files == sorted(["report.html", "summary.md", *(f"figures/{name}" for name in FIGURES)])
    for name in FIGURES:
        png = (both_runs_report / "figures" / name).read_bytes()
        assert png.startswith(PNG_MAGIC)
        assert b"Software" not in png  # no version stamp: the bytes depend on the evidence only


def test_report_html_is_self_contained_and_embeds_every_figure(both_runs_report: Path) -> None:
    page = (both_runs_report / "report.html").read_text(encoding="utf-8")
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    pngs = {(both_runs_report / "figures" / name).read_bytes() for name in FIGURES}
    assert len(embedded) == len(FIGURES)
    assert {base64.b64decode(data) for data in embedded} == pngs
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)  # nothing fetched
    assert "url(" not in page and "@import" not in page and "<script" not in page
    # The decision tables, with reasons; identical ladders of the two runs share one table (the fused
    # pattern), different ones get one each (allreduce: the runs differ at 224 KiB).
    assert (
        page.count(
            "<h3>Decisions (each backend vs NCCL): h7168-run1, h7168-run2 (the same ranges and backends)</h3>"
        )
        == 1
    )
    assert (
        "<h3>Decisions (each backend vs NCCL): h7168-run1</h3>" in page
        and "<h3>Decisions (each backend vs NCCL): h7168-run2</h3>" in page
    )
    assert f'&lt;= {human_bytes(FIRST_RULE.max_bytes)}</td><td class="backend">pcie_ipc</td>' in page
    assert "pcie_ipc beat nccl by &gt;= 5% with its 95% CI clear" in page


def test_summary_md_lists_every_decision_of_both_runs_and_links_the_figures(both_runs_report: Path) -> None:
    summary = (both_runs_report / "summary.md").read_text(encoding="utf-8")
    rows = [line for line in summary.splitlines() if line.startswith("| `h7168-run")]
    decision_rows = [row for row in rows if "| allreduce" in row]
    assert len(decision_rows) == sum(len(entry.rules) for profile in PROFILES for entry in profile.decisions)
    first = f"| <= {human_bytes(FIRST_RULE.max_bytes)} | `pcie_ipc` | {FIRST_RULE.speedup:.2f}x"
    assert any(first in row for row in decision_rows)
    for name in FIGURES:
        assert f"(figures/{name})" in summary


def test_png_bytes_are_reproducible() -> None:
    spec = figure_specs(load_sources([RUN1], DecideSettings(bootstrap=200)))[0][0]
    assert render_png(spec) == render_png(spec)


def test_values_from_files_are_escaped_and_baseline_changes_are_summarised(tmp_path: Path) -> None:
    hostile = tmp_path / "<img src=x onerror=alert(1)>.evidence.json"
    shutil.copyfile(RUN1, hostile)
    # A baseline decided with a 50% margin on an older torch: other ranges, other software.
    baseline = tmp_path / "baseline.yaml"
    replay(RUN1, out=baseline, settings=DecideSettings(margin=0.5, bootstrap=200))
    old = load_profile(baseline)
    software = {**old.node.software, "torch": "2.10.0"}
    dump_profile(dataclasses.replace(old, node=dataclasses.replace(old.node, software=software)), baseline)
    out = tmp_path / "r"
    assert (
        main(["report", str(hostile), "--out", str(out), "--baseline", str(baseline), "--margin", "0.05"])
        == 0
    )

    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "`<img src=x onerror=alert(1)>" in summary  # a code span: shown, never parsed as HTML
    assert f"## Changes against the baseline `{baseline}`" in summary
    assert "| `torch` | `2.10.0` | `2.11.0+cu130` |" in summary
    # At a 50% margin trtllm_oneshot_sglang (1.47x at 7 MiB) and vllm_custom (1.07x) lost their upper
    # sizes, and no fused backend cleared 1.5x over the plain fast path + norm.
    assert (
        "| TP2 / allreduce / `nvswitch` | > 3.5 MiB, <= 7 MiB | nccl -> **trtllm_oneshot_sglang** |"
        in summary
    )
    assert "| TP2 / allreduce / `nvswitch` | > 7 MiB, <= 28 MiB | nccl -> **vllm_custom** |" in summary
    assert (
        "| TP2 / allreduce_rmsnorm / `nvswitch` | > 112 KiB, <= 7 MiB | nccl -> **trtllm_fused_oneshot_vllm** |"
        in summary
    )
    assert (
        "| TP2 / allreduce / `nvswitch` | `trtllm_oneshot_sglang` | > 896 KiB, <= 3.5 MiB -> > 896 KiB, <= 7 MiB "
        "| 1.99x -> 1.47x |"
    ) in summary
    assert "Changes against the baseline" in page and "2.10.0 -&gt; 2.11.0+cu130" in page


def test_a_profile_input_plots_the_evidence_it_names() -> None:
    (source,) = load_sources([PROFILE1], DecideSettings())
    assert source.kind == "profile" and source.evidence is not None and source.notes == ()
    specs, _ = figure_specs([source])
    assert sorted(f"{spec.name}.png" for spec in specs) == FIGURES
    assert all(spec.lines for spec in specs)


def test_a_profile_without_its_evidence_still_gets_its_decisions(tmp_path: Path, capsys) -> None:
    alone = tmp_path / "alone.yaml"
    shutil.copyfile(PROFILE1, alone)
    out = tmp_path / "r"
    assert main(["report", str(alone), "--out", str(out), "--format", "md"]) == 0
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert f"| <= {human_bytes(FIRST_RULE.max_bytes)} | `pcie_ipc` |" in summary
    assert "its evidence h7168-run1.evidence.json is not there: decisions only, no curves" in summary
    assert "decisions only, no curves" in capsys.readouterr().err


def test_without_matplotlib_html_and_png_ask_for_the_extra_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "r"
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MATPLOTLIB, "report", str(RUN1), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "topo-gate: error: figures need matplotlib, the report extra: pip install 'topo-gate[report]'"
    ]
    assert not out.exists()


def test_without_matplotlib_the_markdown_summary_still_works(tmp_path: Path) -> None:
    out = tmp_path / "r"
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MATPLOTLIB, "report", str(RUN1), "--out", str(out), "--format", "md"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["summary.md"]


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["missing.evidence.json"], 3, "missing.evidence.json"),
        ([str(RUN1), "--format", "pdf"], 2, "choose from html,png,md"),
        ([str(RUN1), "--baseline", "missing.yaml", "--format", "md"], 3, "missing.yaml"),
    ],
)
def test_bad_input_is_one_line_and_a_documented_code(tmp_path: Path, args, code, words, capsys) -> None:
    assert main(["report", *args, "--out", str(tmp_path / "r")]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert words in err[-1] and "Traceback" not in "\n".join(err)


def test_json_lists_what_was_written_and_the_warnings(tmp_path: Path, capsys) -> None:
    synthetic = PROFILE1.parents[1] / "examples" / "synthetic-h200x2.yaml"
    no_runs = PROFILE1.parents[1] / "h200-x1" / "tp1-2.yaml"
    out = tmp_path / "r"
    assert main(["report", str(synthetic), str(no_runs), "--out", str(out), "--format", "md", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["files"] == [str(out / "summary.md")]
    # The synthetic example names its (synthetic) evidence: its curves are figures; tp1-2 has none.
    assert [figure["name"] for figure in document["figures"]] == [
        f"{kind}-tp2-nvswitch-{pattern}"
        for pattern in ("allreduce", "allreduce_rmsnorm")
        for kind in ("latency", "speedup", "context", "transition")
    ]
    assert document["notes"] == [
        "the inputs come from 2 node classes (hardware fingerprints differ): overlaid lines compare different hardware",
        "synthetic-h200x2: SYNTHETIC: made-up numbers, not measured on any node",
        "tp1-2: the evidence holds no trial runs (every TP size skipped): nothing to plot",
    ]
    assert "SYNTHETIC: made-up numbers" in (out / "summary.md").read_text(encoding="utf-8")
