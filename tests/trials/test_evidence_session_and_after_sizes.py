"""Evidence v1.2's own fields, accepted when well formed and refused, with the field named, when not.

The base is the bundled v1.2 example (``profiles/examples/synthetic-h200x2.evidence.json``: a shared
worker session per run, ``after_sizes`` with the v1.1 ``after_larger_us`` beside them, and
``context_backends``). Each case changes one field of it; the checks must accept the example as it is,
or every probe the tool writes since v1.2 would be refused on replay.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from evidence_example import BASE, transitioned, written

from topo_gate.evidence.document import EvidenceError, load_evidence

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(evidence: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = evidence["runs"][0]
        for key in parents:
            node = node[key]
        node[last] = value

    return edit


def _after(edit: Callable[[dict[str, Any]], None]) -> Edit:
    return lambda evidence: edit(transitioned(evidence)[1])


def _swap_last_two(result: dict[str, Any]) -> None:
    entries = result["after_sizes"]
    entries[-2], entries[-1] = entries[-1], entries[-2]


def _repeat_last(result: dict[str, Any]) -> None:
    result["after_sizes"].append(copy.deepcopy(result["after_sizes"][-1]))
    result["after_larger_us"] = result["after_sizes"][-1]["samples_us"]


def _first_at_own_size(result: dict[str, Any]) -> None:
    result["after_sizes"][0]["after_nbytes"] = result["nbytes"]


def _off_ladder(result: dict[str, Any]) -> None:
    result["after_sizes"][-1]["after_nbytes"] += 1


def _after_larger_is_another_entry(result: dict[str, Any]) -> None:
    result["after_larger_us"] = result["after_sizes"][0]["samples_us"]


def _after_larger_one_sample_more(result: dict[str, Any]) -> None:
    result["after_larger_us"] = [*result["after_sizes"][-1]["samples_us"], 1.0]


def _after_larger_one_sample_less(result: dict[str, Any]) -> None:
    result["after_larger_us"] = result["after_sizes"][-1]["samples_us"][:-1]


def _no_graph_calls(result: dict[str, Any]) -> None:
    del result["graph_calls"]


def _session_without_own_pattern(evidence: dict[str, Any]) -> None:
    run = evidence["runs"][0]
    run["session"]["patterns"] = [p for p in run["session"]["patterns"] if p != run["pattern"]]


REFUSED: dict[str, tuple[Edit, str]] = {
    "context_backends not a list": (
        _set("context_backends", "nccl"),
        "runs[0].context_backends: must be a list",
    ),
    "context_backends names a backend twice": (
        _set("context_backends", ["trtllm_oneshot", "nccl", "trtllm_oneshot"]),
        "runs[0].context_backends: lists a backend twice",
    ),
    "context_backends with an empty name": (
        _set("context_backends", ["nccl", ""]),
        "runs[0].context_backends[1]: must be a non-empty string",
    ),
    "session a list": (_set("session", ["allreduce"]), "runs[0].session: must be an object, found list"),
    "session a string": (_set("session", "tp2-0-1"), "runs[0].session: must be an object, found str"),
    "session without an id": (
        lambda e: e["runs"][0]["session"].pop("id"),
        "runs[0].session.id: missing",
    ),
    "session id empty": (_set("session.id", ""), "runs[0].session.id: must be a non-empty string"),
    "session pattern unknown": (
        _set("session.patterns", ["allreduce", "allgather"]),
        "runs[0].session.patterns[1]",
    ),
    "session without the run's own pattern": (
        _session_without_own_pattern,
        "runs[0].session.patterns: must include the run's own pattern 'allreduce'",
    ),
    "session wall time negative": (
        _set("session.wall_s", -0.5),
        "runs[0].session.wall_s: must be a number of seconds",
    ),
    "session wall time text": (
        _set("session.wall_s", "12"),
        "runs[0].session.wall_s: must be a number of seconds",
    ),
    "session phases a list": (_set("session.phases_s", [1.0]), "runs[0].session.phases_s: must be an object"),
    "session phase negative": (
        _set("session.phases_s.import", -1.0),
        "runs[0].session.phases_s.import: must be a number of seconds",
    ),
    "after_sizes descending": (
        _after(_swap_last_two),
        "after_sizes[{last}].after_nbytes: must be larger than the entry before",
    ),
    "after_sizes repeating a size": (
        _after(_repeat_last),
        "after_sizes[{extra}].after_nbytes: must be larger than the entry before",
    ),
    "after_sizes starting at the result's own size": (
        _after(_first_at_own_size),
        "after_sizes[0].after_nbytes: must be larger than the result's own size",
    ),
    "after_sizes off the ladder": (_after(_off_ladder), "is not a size of the run's ladder"),
    "after_larger_us another entry's samples": (
        _after(_after_larger_is_another_entry),
        "after_larger_us: must equal the samples of the largest after_sizes entry",
    ),
    "after_larger_us one sample more": (
        _after(_after_larger_one_sample_more),
        "after_larger_us: must equal the samples of the largest after_sizes entry",
    ),
    "after_larger_us one sample less": (
        _after(_after_larger_one_sample_less),
        "after_larger_us: must equal the samples of the largest after_sizes entry",
    ),
    "after_sizes without graph_calls": (_after(_no_graph_calls), "graph_calls: missing"),
}


def test_the_example_has_what_these_cases_edit() -> None:
    run = BASE["runs"][0]
    assert BASE["format"] == "topo-gate/evidence/v1.2" and run["pattern"] == "allreduce"
    assert run["session"]["patterns"] == ["allreduce", "allreduce_rmsnorm"]
    index, result = transitioned(BASE)
    assert result["after_larger_us"] == result["after_sizes"][-1]["samples_us"]
    assert "import" in run["session"]["phases_s"] and index >= 0


def test_the_v12_example_is_read_whole(tmp_path: Path) -> None:
    """Sessions, after_sizes with after_larger_us equal to the largest entry, context_backends listed."""
    evidence = copy.deepcopy(BASE)
    evidence["runs"][0]["context_backends"] = ["nccl", "trtllm_oneshot"]
    loaded = load_evidence(written(tmp_path, evidence))
    assert loaded["runs"][0]["session"] == BASE["runs"][0]["session"]
    assert loaded["runs"][0]["context_backends"] == ["nccl", "trtllm_oneshot"]


@pytest.mark.parametrize(
    "session",
    [None, {"id": "s", "patterns": ["allreduce"], "wall_s": 0, "phases_s": {}}],
    ids=["no session", "a session of one pattern, zero seconds, no phases"],
)
def test_the_least_a_run_may_say_of_its_session_is_read(tmp_path: Path, session: Any) -> None:
    evidence = copy.deepcopy(BASE)
    evidence["runs"][0]["session"] = session
    assert load_evidence(written(tmp_path, evidence))["runs"][0]["session"] == session


def test_after_sizes_of_one_entry_is_read_without_after_larger_us(tmp_path: Path) -> None:
    evidence = copy.deepcopy(BASE)
    _, result = transitioned(evidence)
    result["after_sizes"] = result["after_sizes"][:1]
    del result["after_larger_us"]
    assert load_evidence(written(tmp_path, evidence))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_malformed_v12_field_is_refused_naming_it(tmp_path: Path, name: str) -> None:
    edit, expected = REFUSED[name]
    evidence = copy.deepcopy(BASE)
    edit(evidence)
    index, result = transitioned(BASE)
    entries = len(result["after_sizes"])
    expected = expected.format(last=entries - 1, extra=entries)
    with pytest.raises(EvidenceError) as caught:
        load_evidence(written(tmp_path, evidence))
    message = str(caught.value)
    assert "\n" not in message and expected in message
    if expected.startswith(("after_sizes", "after_larger_us", "graph_calls")):
        assert f"runs[0].results[{index}].{expected}" in message


def _top(key: str, value: Any) -> Edit:
    def edit(evidence: dict[str, Any]) -> None:
        evidence[key] = value

    return edit


def _trial(key: str, value: Any) -> Edit:
    def edit(evidence: dict[str, Any]) -> None:
        evidence["trials"][key] = value

    return edit


def _dropped(**fields: Any) -> Edit:
    """``budget.dropped`` holding one entry as a budgeted probe writes it, with ``fields`` changed."""
    entry = {"tp": 2, "pattern": "allreduce", "what": "rounds 15 -> 5", "reason": "to fit the 60 s budget"}
    entry.update(fields)
    entry = {key: value for key, value in entry.items() if value is not None}

    def edit(evidence: dict[str, Any]) -> None:
        evidence["budget"] = {"seconds": 60, "dropped": [entry]}

    return edit


def _first_result(key: str, value: Any) -> Edit:
    """Change result 0 of run 0 (NCCL at the smallest size: no after_sizes depend on its size)."""

    def edit(evidence: dict[str, Any]) -> None:
        result = evidence["runs"][0]["results"][0]
        assert "after_sizes" not in result and "after_larger_us" not in result
        result[key] = value

    return edit


ACCEPTED_AT_THE_LIMIT: dict[str, Edit] = {
    # The planner itself writes this one: TP 1 gets no trials, recorded as skipped.
    "a skipped TP 1": _top("skipped", [{"tp": 1, "reason": "TP 1 runs no all-reduce: nothing to gate"}]),
    "hidden size 1": _trial("hidden", 1),
    "a message of 1 byte": _first_result("nbytes", 1),
    "a dropped entry at TP 1": _dropped(tp=1),
    "a dropped entry as written": _dropped(),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED_AT_THE_LIMIT))
def test_the_smallest_value_each_field_allows_is_read(tmp_path: Path, name: str) -> None:
    """A count or size at its least allowed value (1) is evidence decide can use, not a refusal."""
    evidence = copy.deepcopy(BASE)
    ACCEPTED_AT_THE_LIMIT[name](evidence)
    assert load_evidence(written(tmp_path, evidence)) == evidence


FORMAT_OF_40 = ("another-tool/record/v1-" + "x" * 40)[:40]
FORMAT_OF_41 = FORMAT_OF_40 + "y"

REFUSED_EXACTLY: dict[str, tuple[Edit, str]] = {
    # A format that sorts before v1 is no more readable than v2 (bad-format-v2.json) is.
    "an older evidence format": (
        _top("format", "topo-gate/evidence/v0"),
        "unsupported evidence format 'topo-gate/evidence/v0' (this topo-gate reads topo-gate/evidence/v1)",
    ),
    # Another tool's format is shown whole up to 40 characters, past that cut short as str '...'.
    "a foreign format of 40 characters": (
        _top("format", FORMAT_OF_40),
        f"not topo-gate evidence (format '{FORMAT_OF_40}')",
    ),
    "a foreign format of 41 characters": (
        _top("format", FORMAT_OF_41),
        f"not topo-gate evidence (format str '{FORMAT_OF_41[:37]}...')",
    ),
    "a skipped TP 0": (
        _top("skipped", [{"tp": 0, "reason": "none"}]),
        "skipped[0].tp: must be >= 1, found 0",
    ),
    "hidden size 0": (_trial("hidden", 0), "trials.hidden: must be >= 1, found 0"),
    "a message of 0 bytes": (_first_result("nbytes", 0), "runs[0].results[0].nbytes: must be >= 1, found 0"),
    "a group naming one GPU twice": (
        _set("group", [0, 0]),
        "runs[0].group: must list 2 distinct GPUs, found [0, 0]",
    ),
    "a group of 3 with 2 distinct GPUs": (
        _set("group", [0, 1, 1]),
        "runs[0].group: must list 2 distinct GPUs, found [0, 1, 1]",
    ),
    "a group too short": (_set("group", [0]), "runs[0].group: must list 2 distinct GPUs, found [0]"),
    "a dropped entry at TP 0": (_dropped(tp=0), "budget.dropped[0].tp: must be >= 1, found 0"),
    "a dropped entry without a TP": (_dropped(tp=None), "budget.dropped[0].tp: missing"),
    "a dropped entry of an unknown pattern": (
        _dropped(pattern="allgather"),
        "budget.dropped[0].pattern: must be one of allreduce, allreduce_rmsnorm, found str 'allgather'",
    ),
    "a dropped entry saying nothing dropped": (
        _dropped(what=""),
        "budget.dropped[0].what: must be a non-empty string, found str ''",
    ),
    "a dropped entry without a reason": (_dropped(reason=None), "budget.dropped[0].reason: missing"),
    "a dropped entry that is text": (
        _top("budget", {"seconds": 60, "dropped": ["rounds"]}),
        "budget.dropped[0]: must be an object, found str 'rounds'",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED_EXACTLY))
def test_a_malformed_field_is_refused_in_exactly_one_line(tmp_path: Path, name: str) -> None:
    """decide and probe --replay print this line (exit 3): the file, then the field and its problem."""
    edit, expected = REFUSED_EXACTLY[name]
    evidence = copy.deepcopy(BASE)
    edit(evidence)
    path = written(tmp_path, evidence)
    with pytest.raises(EvidenceError) as caught:
        load_evidence(path)
    assert str(caught.value) == f"{path}: {expected}"
