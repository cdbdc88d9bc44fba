"""``recommend --launcher trtllm --format yaml > extra.yaml`` is a file ``trtllm-serve
--extra_llm_api_options`` accepts, whatever the plan: the LLM-API options alone (TensorRT-LLM's
argument model forbids unknown keys), an empty mapping with comments when there are none.

Checked with the pinned release's own argument model where ``tensorrt_llm`` is importable (a GPU
image: ``python -m pytest -q tests/launchers/test_trtllm_options_file.py``), else against its field
list: the knob manifest extracted from that release's ``llm_args.py`` (scripts/extract_knobs.py).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from knob_cases import BY_NAME, CASES
from priced_profiles import FINGERPRINT

from topo_gate.cli import main
from topo_gate.launchers.knobs import PINNED

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads(
    (ROOT / "topo_gate/launchers/data" / f"knobs-trtllm-{PINNED['trtllm']}.json").read_text()
)
BUNDLED_H200 = ROOT / "profiles" / "h200-x2" / "h7168-run1.yaml"
TRTLLM_CASES = [case for case in CASES if case.launcher == "trtllm"]


def options_file(capsys, *argv: str) -> str:
    code = main(["recommend", *argv, "--launcher", "trtllm", "--format", "yaml"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def case_file(capsys, tmp_path: Path, case, monkeypatch) -> str:
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", FINGERPRINT)
    env = [f"--launcher-env={k}={v}" for k, v in case.user_env.items()]
    args = ["--launcher-args", shlex.join(case.user_args)] if case.user_args else []
    path = case.write(tmp_path / f"{case.name}.yaml")
    return options_file(capsys, str(path), "--tp", str(case.tp), "--model", case.model, *env, *args)


def assert_only_known_options(text: str) -> dict:
    """What the release's field list admits: a mapping of known LLM-API keys with allowed values; every
    other line a comment."""
    options = yaml.safe_load(text)
    assert isinstance(options, dict)
    for key, value in options.items():
        assert key in MANIFEST["config_keys"], key
        assert value in MANIFEST["config_keys"][key]["choices"]
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert yaml.safe_load("\n".join(body)) == options
    return options


@pytest.mark.parametrize("case", TRTLLM_CASES, ids=lambda case: case.name)
def test_a_plan_with_options_writes_exactly_them(case, capsys, tmp_path, monkeypatch) -> None:
    text = case_file(capsys, tmp_path, case, monkeypatch)
    assert assert_only_known_options(text) == dict(case.config)
    assert text.startswith(f"# extra LLM-API options for TensorRT-LLM {PINNED['trtllm']}, from topo-gate\n")


def test_no_knobs_is_an_empty_mapping_with_the_reasons_in_comments(capsys, monkeypatch) -> None:
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)  # planned for the profile's class
    text = options_file(capsys, str(BUNDLED_H200), "--tp", "2", "--model", "llama-3.1-70b")
    assert assert_only_known_options(text) == {}
    assert text.splitlines()[-1] == "{}"
    assert "# no options: TensorRT-LLM runs as it would without this file" in text
    assert not any(line.startswith(("launcher:", "notes:", "reason:")) for line in text.splitlines())


@pytest.mark.parametrize(
    ("fallback", "expected"), [("launcher-default", {}), ("nccl", {"allreduce_strategy": "NCCL"})]
)
def test_a_fallback_writes_only_what_it_forces(fallback, expected, capsys, tmp_path) -> None:
    text = options_file(capsys, str(tmp_path / "missing.yaml"), "--tp", "2", "--fallback", fallback)
    assert assert_only_known_options(text) == expected
    assert text.splitlines()[1].startswith("# FALLBACK: ")


def test_every_comment_is_one_line(capsys, tmp_path, monkeypatch) -> None:
    text = case_file(capsys, tmp_path, BY_NAME["trtllm-nccl"], monkeypatch)
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert len(comments) >= 3 and all("\n" not in line for line in comments)
    assert all(line.startswith("# ") for line in comments)


def test_the_release_argument_model_accepts_the_file(capsys, tmp_path, monkeypatch) -> None:
    llm_args = pytest.importorskip("tensorrt_llm.llmapi.llm_args", reason="TensorRT-LLM not installed")
    for case in TRTLLM_CASES:
        options = yaml.safe_load(case_file(capsys, tmp_path, case, monkeypatch))
        merged = llm_args.update_llm_args_with_extra_dict({"model": "m"}, options)
        assert llm_args.TorchLlmArgs(**merged).allreduce_strategy == case.config["allreduce_strategy"]
