"""``topo-gate ab`` plans for what CMD really runs: the model the README's vLLM command serves, and the
release CMD's own interpreter has installed (a real venv with real metadata), both in the record."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from ab_helpers import DATA, FAKE, FINGERPRINT

from topo_gate.ab.record import load_record
from topo_gate.cli import main
from topo_gate.launchers import knobs
from topo_gate.launchers.command.releases import modelled_words

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launchers"))
from stand_in_launcher import launcher_venv  # noqa: E402

pytestmark = pytest.mark.slow

STEADY = [0.01, 0.01, 0.0101, 0.0102, 0.0099, 0.01]
MODELLED = {"vllm": "0.33.0", "flashinfer-python": "0.7.2.post1"}


def ab(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["ab", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def latency_scenario(bench, node) -> None:
    bench.scenario(
        arms=node.arm_markers()[0],
        values={"default": STEADY, "plan": STEADY},
        template=str(DATA / "vllm-latency.json"),
        set=["avg_latency"],
        result_flag="--output-json",
    )


def venv_vllm(bench, versions: dict[str, str]) -> str:
    """``vllm`` on PATH: a console script of a venv holding ``versions``, running the stand-in."""
    bin_folder = launcher_venv(bench.root / "venv", versions, scripts=())
    script = bin_folder / "vllm"
    script.write_text(
        f"#!{bin_folder / 'python'}\nimport runpy\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    script.chmod(0o755)
    bench._monkeypatch.setenv("PATH", os.pathsep.join([str(bin_folder), os.environ["PATH"]]))
    return "vllm"


def test_the_readmes_vllm_command_plans_the_model_it_names(bench, capsys, tmp_path, vllm_node) -> None:
    # README: topo-gate ab --profile node.yaml --out ab-vllm.json -- vllm bench latency
    #   --model meta-llama/Llama-3.1-70B-Instruct -tp 2 --batch-size 8 --output-len 128  (no --model of ab's)
    latency_scenario(bench, vllm_node)
    cmd = [venv_vllm(bench, MODELLED), "bench", "latency", "--model", "meta-llama/Llama-3.1-70B-Instruct"]
    cmd += ["-tp", "2", "--batch-size", "8", "--output-len", "128"]
    node = ["--profile", str(vllm_node.profile), "--node-fingerprint", FINGERPRINT]
    out = tmp_path / "ab-vllm.json"
    code, _, err = ab(capsys, *node, "--out", str(out), "--", *cmd)
    assert code == 0, err
    assert (
        "topo-gate: served model meta-llama/Llama-3.1-70B-Instruct (preset llama-3-70b), read from CMD" in err
    )
    assert "warning" not in err
    record = load_record(out)
    assert (record["model"], record["launcher_version"]) == ("llama-3-70b", "0.33.0")
    assert record["release"]["modelled"] == "0.33.0" and record["release"]["installed"] == "0.33.0"
    assert record["release"]["override"] is None and "in the interpreter of" in record["release"]["read"]
    assert any(
        note.startswith("release: vLLM 0.33.0 (read in the interpreter of") for note in record["notes"]
    )
    # The plan arm ran the plan for that model: the same knobs as with ab's own --model.
    assert record["arms"]["plan"]["env"] == vllm_node.planned(cmd).env


def test_a_release_with_no_route_model_is_no_plan_naming_both(bench, capsys, vllm_node) -> None:
    latency_scenario(bench, vllm_node)
    cmd = [venv_vllm(bench, {**MODELLED, "vllm": "0.35.0"}), "bench", "latency", "--model", "M", "-tp", "2"]
    code, _, err = ab(capsys, *vllm_node.args(), "--", *cmd)
    assert code == 1 and bench.seen() == []
    assert err.startswith("topo-gate: error: the profile gives no plan here: vLLM 0.35.0 installed;")
    assert f"models vLLM {modelled_words('vllm')}: upgrade topo-gate" in err


def test_the_override_is_recorded(bench, capsys, tmp_path, vllm_node, monkeypatch) -> None:
    latency_scenario(bench, vllm_node)
    monkeypatch.setenv("TOPO_GATE_ALLOW_RELEASE", "0.35.0")
    cmd = [venv_vllm(bench, {**MODELLED, "vllm": "0.35.0"}), "bench", "latency", "--model", "M", "-tp", "2"]
    out = tmp_path / "ab.json"
    code, _, err = ab(capsys, *vllm_node.args(), "--out", str(out), "--", *cmd)
    assert code == 0, err
    assert (
        f"topo-gate: ab: warning: TOPO_GATE_ALLOW_RELEASE: vLLM 0.35.0 planned with the {knobs.PINNED['vllm']} model"
        in err
    )
    release = load_record(out)["release"]
    assert (release["modelled"], release["installed"], release["override"]) == (
        knobs.PINNED["vllm"],
        "0.35.0",
        "0.35.0",
    )


def test_a_model_that_cannot_be_told_warns_in_every_format(bench, capsys, vllm_node) -> None:
    warning = (
        "topo-gate: warning: the served model 'acme/house-model' is no preset and no local folder with a "
        "config.json: the launchers' token limits are converted with the profile's hidden size"
    )
    node = ["--profile", str(vllm_node.profile), "--node-fingerprint", FINGERPRINT]
    for output in ([], ["--json"]):
        latency_scenario(bench, vllm_node)
        cmd = [venv_vllm(bench, MODELLED), "bench", "latency", "--model", "acme/house-model", "-tp", "2"]
        code, _, err = ab(capsys, *node, *output, "--", *cmd)
        assert code == 0, err
        assert warning in err, output
        (bench.root / "venv").rename(bench.root / f"venv-{len(output)}")
