"""Evidence v1.3's optional fields: the probe's ``preflight`` rows and each TRT-LLM backend's
``call`` settings, accepted as a probe writes them and refused in one line naming the field.

The base is the bundled v1.2 example (``evidence_example.BASE``, which the checks accept as it is)
with one preflight row and one ``call`` block added; each case changes one thing. Evidence without
either field (every file written before v1.3) stays valid: the example itself.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from evidence_example import BASE, written

from topo_gate.evidence.check import PREFLIGHT_KEYS, evidence_problem
from topo_gate.evidence.document import EvidenceError, load_evidence

ROW: dict[str, Any] = {
    "tp": 2, "group_class": "nvswitch", "launcher": "sglang", "release": "0.5.23",
    "variants": ["LlamaForCausalLM"], "pattern": "allreduce", "min_tokens": 1, "max_tokens": 1170,
    "path": "custom_v2_sglang", "timed": False, "why": "sglang not installed", "action": "pip install sglang==0.5.23",
}  # fmt: skip
CALL = {
    "fp32_acc": False,
    "launch_with_pdl": True,
    "trigger_completion_at_end": "tokens > 16",
    "source": "vllm",
}


def _with(row: dict[str, Any] | None = None, call: Any = CALL) -> dict[str, Any]:
    evidence = copy.deepcopy(BASE)
    evidence["format"] = "topo-gate/evidence/v1.3"
    evidence["preflight"] = [dict(ROW if row is None else row)]
    name = next(iter(evidence["runs"][0]["backends"]))
    evidence["runs"][0]["backends"][name]["call"] = call
    return evidence


def _backend_name() -> str:
    return next(iter(BASE["runs"][0]["backends"]))


def test_the_example_without_v13_fields_stays_valid() -> None:
    assert "preflight" not in BASE and evidence_problem(BASE) is None


def test_a_preflight_row_and_a_call_block_as_a_probe_writes_them_are_read(tmp_path: Path) -> None:
    loaded = load_evidence(written(tmp_path, _with()))
    assert loaded["preflight"] == [ROW]
    assert loaded["runs"][0]["backends"][_backend_name()]["call"] == CALL


@pytest.mark.parametrize(
    "edit",
    [
        {"tp": 1}, {"max_tokens": None}, {"max_tokens": 1}, {"min_tokens": 1170, "max_tokens": 1170},
        {"variants": []}, {"timed": True, "why": None, "action": None}, {"why": None},
        {"pattern": "allreduce_rmsnorm"},
    ],
    ids=["tp-1", "open-ended", "one-token", "one-size", "any-model", "timed", "no-why", "norm-site"],
)  # fmt: skip
def test_a_row_at_the_edge_of_each_bound_is_read(edit: dict[str, Any]) -> None:
    assert evidence_problem(_with({**ROW, **edit})) is None


@pytest.mark.parametrize(
    ("edit", "field", "problem"),
    [
        ({"tp": 0}, "tp", "must be >= 1, found 0"),
        ({"tp": True}, "tp", "must be an integer"),
        ({"min_tokens": 0}, "min_tokens", "must be >= 1, found 0"),
        ({"min_tokens": 5, "max_tokens": 4}, "max_tokens", "must be >= 5, found 4"),
        ({"max_tokens": "all"}, "max_tokens", "must be an integer"),
        ({"timed": 1}, "timed", "must be true or false"),
        ({"timed": None}, "timed", "must be true or false"),
        ({"pattern": "allgather"}, "pattern", "must be one of allreduce, allreduce_rmsnorm"),
        ({"variants": "LlamaForCausalLM"}, "variants", "must be a list"),
        ({"variants": ["LlamaForCausalLM", ""]}, "variants[1]", "must be a non-empty string"),
        ({"group_class": ""}, "group_class", "must be a non-empty string"),
        ({"launcher": 3}, "launcher", "must be a non-empty string"),
        ({"release": ""}, "release", "must be a non-empty string"),
        ({"path": None}, "path", "must be a non-empty string"),
        ({"why": ""}, "why", "must be a non-empty string"),
        ({"action": 7}, "action", "must be a non-empty string"),
    ],
)  # fmt: skip
def test_a_malformed_row_is_refused_naming_its_field(
    tmp_path: Path, edit: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(EvidenceError) as caught:
        load_evidence(written(tmp_path, _with({**ROW, **edit})))
    message = str(caught.value)
    assert f"preflight[0].{field}: {problem}" in message and "\n" not in message


@pytest.mark.parametrize("missing", PREFLIGHT_KEYS)
def test_a_row_missing_a_key_is_refused_naming_the_keys(missing: str) -> None:
    row = {key: value for key, value in ROW.items() if key != missing}
    assert evidence_problem(_with(row)) == f"preflight[0]: needs {', '.join(PREFLIGHT_KEYS)}"


def test_a_row_that_is_not_an_object_and_a_preflight_that_is_not_a_list_are_refused() -> None:
    evidence = _with()
    evidence["preflight"] = ["row"]
    assert evidence_problem(evidence) == f"preflight[0]: needs {', '.join(PREFLIGHT_KEYS)}"
    evidence["preflight"] = {"rows": []}
    assert evidence_problem(evidence) == "preflight: must be a list, found dict"


def test_an_empty_preflight_is_read() -> None:
    evidence = _with()
    evidence["preflight"] = []
    assert evidence_problem(evidence) is None


@pytest.mark.parametrize(
    "call", [{}, {"fp32_acc": True}, {"fp32_acc": False, "use_oneshot": "FlashInfer's heuristic"}]
)
def test_call_settings_of_flags_and_words_are_read(call: dict[str, Any]) -> None:
    assert evidence_problem(_with(call=call)) is None


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (["fp32_acc"], "call: must be an object, found list"),
        (None, "call: must be an object, found null"),
        ({"fp32_acc": 1}, "call.fp32_acc: must be a non-empty string, found int 1"),
        ({"source": ""}, "call.source: must be a non-empty string"),
        ({"launch_with_pdl": None}, "call.launch_with_pdl: must be a non-empty string, found null"),
    ],
)
def test_malformed_call_settings_are_refused_naming_the_backend(call: Any, problem: str) -> None:
    found = evidence_problem(_with(call=call))
    assert found is not None and found.startswith(f"runs[0].backends.{_backend_name()}.{problem}")
