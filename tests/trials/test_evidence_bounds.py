"""Every integer field of evidence at its smallest value and one below, and the shapes of the optional
blocks a probe writes only on some nodes (graph checks, dropped plans, provenance).

A bound that moves by one either refuses evidence a probe wrote (a TP of 1, GPU 0, one token) or lets
through a value the decisions divide by or index with (zero tokens, zero graph calls, GPU -1), and the
user reads the field and the bound in one line, not a traceback from ``decide``. The base is the bundled
v1.2 example (``profiles/examples/synthetic-h200x2.evidence.json``); each case changes one field.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from evidence_example import BASE, transitioned, written

from topo_gate.evidence.document import EvidenceError, load_evidence

Edit = Callable[[dict[str, Any], int], None]


def _load(tmp_path: Path, evidence: dict[str, Any]) -> dict[str, Any]:
    return load_evidence(written(tmp_path, evidence))


def _refusal(tmp_path: Path, evidence: dict[str, Any]) -> str:
    with pytest.raises(EvidenceError) as caught:
        _load(tmp_path, evidence)
    return str(caught.value)


def _run(evidence: dict[str, Any]) -> dict[str, Any]:
    return evidence["runs"][0]


def _smallest_result(evidence: dict[str, Any]) -> dict[str, Any]:
    """Run 0's first result: the ladder's smallest size, which no ``after_sizes`` entry names, and
    which the other backends' results at that size keep in the ladder."""
    return _run(evidence)["results"][0]


def _run_tp(evidence: dict[str, Any], value: int) -> None:
    _run(evidence)["tp"] = value
    _run(evidence)["group"] = list(range(max(value, 0)))


def _group_gpu(evidence: dict[str, Any], value: int) -> None:
    _run(evidence)["group"] = [value, 1]


def _graph_check_tokens(evidence: dict[str, Any], value: int) -> None:
    _run(evidence)["graph_checks"] = [{"backend": "trtllm_oneshot", "tokens": value, "status": "ok"}]


def _dropped_tp(evidence: dict[str, Any], value: int) -> None:
    dropped = {"tp": value, "pattern": "allreduce", "what": "layer graphs", "reason": "over the budget"}
    evidence["budget"]["dropped"] = [dropped]


def _after_larger_graph_calls(evidence: dict[str, Any], value: int) -> None:
    """A v1.1 result: ``after_larger_us`` without ``after_sizes``, whose graph calls are checked alone."""
    _, result = transitioned(evidence)
    result["after_larger_us"] = result.pop("after_sizes")[-1]["samples_us"]
    result["graph_calls"] = value


def _after_sizes_graph_calls(evidence: dict[str, Any], value: int) -> None:
    """A v1.2 result with ``after_sizes`` alone (no v1.1 ``after_larger_us`` beside them)."""
    _, result = transitioned(evidence)
    del result["after_larger_us"]
    result["graph_calls"] = value


def _field(where: Callable[[dict[str, Any]], dict[str, Any]], key: str) -> Edit:
    def edit(evidence: dict[str, Any], value: int) -> None:
        where(evidence)[key] = value

    return edit


# (the field as the user reads it, its smallest value, the edit that sets it)
BOUNDS: list[tuple[str, int, Edit]] = [
    ("skipped[0].tp", 1, _field(lambda e: e["skipped"][0], "tp")),
    ("trials.hidden", 1, _field(lambda e: e["trials"], "hidden")),
    ("trials.tp[0]", 1, lambda e, value: e["trials"]["tp"].__setitem__(0, value)),
    ("runs[0].tp", 1, _run_tp),
    ("runs[0].group[0]", 0, _group_gpu),
    ("runs[0].results[0].tokens", 1, _field(_smallest_result, "tokens")),
    ("runs[0].results[0].nbytes", 1, _field(_smallest_result, "nbytes")),
    ("runs[0].context[0].tokens", 1, _field(lambda e: _run(e)["context"][0], "tokens")),
    ("runs[0].context[0].nbytes", 1, _field(lambda e: _run(e)["context"][0], "nbytes")),
    ("runs[0].graph_checks[0].tokens", 1, _graph_check_tokens),
    ("budget.dropped[0].tp", 1, _dropped_tp),
]


@pytest.mark.parametrize(("field", "smallest", "edit"), BOUNDS, ids=[bound[0] for bound in BOUNDS])
def test_an_integer_field_at_its_smallest_value_is_read(
    tmp_path: Path, field: str, smallest: int, edit: Edit
) -> None:
    evidence = copy.deepcopy(BASE)
    edit(evidence, smallest)
    _load(tmp_path, evidence)


@pytest.mark.parametrize(("field", "smallest", "edit"), BOUNDS, ids=[bound[0] for bound in BOUNDS])
def test_an_integer_field_one_below_its_smallest_is_refused_naming_it(
    tmp_path: Path, field: str, smallest: int, edit: Edit
) -> None:
    evidence = copy.deepcopy(BASE)
    edit(evidence, smallest - 1)
    assert _refusal(tmp_path, evidence).endswith(f"{field}: must be >= {smallest}, found {smallest - 1}")


@pytest.mark.parametrize("edit", [_after_sizes_graph_calls, _after_larger_graph_calls], ids=["v1.2", "v1.1"])
def test_graph_calls_of_a_replayed_result_are_at_least_one(tmp_path: Path, edit: Edit) -> None:
    """The transition replays are timed over ``graph_calls`` calls of one graph; zero would divide by
    zero in the per-call time, so one is read and zero refused, for v1.1's and v1.2's replays alike."""
    evidence = copy.deepcopy(BASE)
    edit(evidence, 1)
    _load(tmp_path, evidence)
    evidence = copy.deepcopy(BASE)
    where = f"runs[0].results[{transitioned(evidence)[0]}].graph_calls"
    edit(evidence, 0)
    assert _refusal(tmp_path, evidence).endswith(f"{where}: must be >= 1, found 0")


def test_an_after_size_of_zero_bytes_is_refused_as_a_size_not_as_off_the_ladder(tmp_path: Path) -> None:
    evidence = copy.deepcopy(BASE)
    _, result = transitioned(evidence)
    result["after_sizes"][0]["after_nbytes"] = 0
    where = f"runs[0].results[{_run(evidence)['results'].index(result)}].after_sizes[0].after_nbytes"
    assert _refusal(tmp_path, evidence).endswith(f"{where}: must be >= 1, found 0")


@pytest.mark.parametrize("missing", ["backend", "tokens", "status"])
def test_a_graph_check_missing_a_key_is_refused_naming_the_keys(tmp_path: Path, missing: str) -> None:
    check = {"backend": "trtllm_oneshot", "tokens": 1, "status": "ok"}
    del check[missing]
    evidence = copy.deepcopy(BASE)
    _run(evidence)["graph_checks"] = [check]
    assert _refusal(tmp_path, evidence).endswith("runs[0].graph_checks[0]: needs backend, tokens, status")


def test_evidence_without_provenance_is_read(tmp_path: Path) -> None:
    """Evidence written before provenance was recorded has none: the node is checked without it."""
    evidence = copy.deepcopy(BASE)
    evidence["node"].pop("provenance", None)
    _load(tmp_path, evidence)


@pytest.mark.parametrize("provenance", [["a", "list"], "text", 7], ids=["list", "string", "number"])
def test_recorded_provenance_is_checked_as_the_profile_node_checks_it(
    tmp_path: Path, provenance: Any
) -> None:
    """Provenance that is present is the profile's: a malformed one is refused here, on replay, not
    written into a profile that the loader then refuses."""
    evidence = copy.deepcopy(BASE)
    evidence["node"]["provenance"] = provenance
    assert "provenance" in _refusal(tmp_path, evidence)


# -- lists whose every entry is checked, and fields checked only for some statuses ------------------------


def test_every_trials_pattern_is_a_known_pattern(tmp_path: Path) -> None:
    evidence = copy.deepcopy(BASE)
    evidence["trials"]["patterns"] = ["allreduce", "allgather"]
    assert _refusal(tmp_path, evidence).endswith(
        "evidence.json: trials.patterns[1]: must be one of allreduce, allreduce_rmsnorm, found str 'allgather'"
    )


def test_every_retry_of_a_run_is_a_line_of_text(tmp_path: Path) -> None:
    evidence = copy.deepcopy(BASE)
    _run(evidence)["retries"] = ["attempt 1: the workers hung", 7]
    assert _refusal(tmp_path, evidence).endswith(
        "evidence.json: runs[0].retries[1]: must be a non-empty string, found int 7"
    )


def test_a_failed_result_may_have_no_samples_and_an_ok_one_may_not(tmp_path: Path) -> None:
    evidence = copy.deepcopy(BASE)
    result = _smallest_result(evidence)
    result.update(status="failed", samples_us=[], reason="the kernel returned an error")
    _load(tmp_path, evidence)
    result["status"] = "ok"
    assert _refusal(tmp_path, evidence).endswith("status ok without samples")


@pytest.mark.parametrize(
    ("error", "found"), [("0.001", "str '0.001'"), (True, "bool True"), ([0.001], "list")]
)
def test_a_results_error_is_a_number_or_null(tmp_path: Path, error: object, found: str) -> None:
    evidence = copy.deepcopy(BASE)
    _smallest_result(evidence)["max_abs_err"] = error
    assert _refusal(tmp_path, evidence).endswith(
        f"evidence.json: runs[0].results[0].max_abs_err: must be a number or null, found {found}"
    )


def test_a_long_list_of_distinct_context_backends_is_read(tmp_path: Path) -> None:
    # Past 256 entries CPython's lengths are no longer shared objects: the check compares counts by value.
    evidence = copy.deepcopy(BASE)
    _run(evidence)["context_backends"] = [f"backend_{index}" for index in range(300)]
    _load(tmp_path, evidence)
