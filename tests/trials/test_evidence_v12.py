"""Evidence v1.2's own fields, accepted when well formed and refused, with the field named, when not.

The base is the bundled v1.2 example (``profiles/examples/synthetic-h200x2.evidence.json``: a shared
worker session per run, ``after_sizes`` with the v1.1 ``after_larger_us`` beside them, and
``context_backends``). Each case changes one field of it; the checks must accept the example as it is,
or every probe the tool writes since v1.2 would be refused on replay.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo_gate.trials.evidence import EvidenceError, load_evidence

EXAMPLE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.evidence.json"
BASE: dict[str, Any] = json.loads(EXAMPLE.read_text(encoding="utf-8"))

Edit = Callable[[dict[str, Any]], None]


def _transitioned(evidence: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The first result of run 0 with at least two ``after_sizes`` entries (and its index)."""
    results = evidence["runs"][0]["results"]
    return next((i, r) for i, r in enumerate(results) if len(r.get("after_sizes", [])) >= 2)


def _set(path: str, value: Any) -> Edit:
    def edit(evidence: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = evidence["runs"][0]
        for key in parents:
            node = node[key]
        node[last] = value

    return edit


def _after(edit: Callable[[dict[str, Any]], None]) -> Edit:
    return lambda evidence: edit(_transitioned(evidence)[1])


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


def _written(tmp_path: Path, evidence: dict[str, Any]) -> Path:
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence), encoding="utf-8")
    return path


def test_the_example_has_what_these_cases_edit() -> None:
    run = BASE["runs"][0]
    assert BASE["format"] == "topo-gate/evidence/v1.2" and run["pattern"] == "allreduce"
    assert run["session"]["patterns"] == ["allreduce", "allreduce_rmsnorm"]
    index, result = _transitioned(BASE)
    assert result["after_larger_us"] == result["after_sizes"][-1]["samples_us"]
    assert "import" in run["session"]["phases_s"] and index >= 0


def test_the_v12_example_is_read_whole(tmp_path: Path) -> None:
    """Sessions, after_sizes with after_larger_us equal to the largest entry, context_backends listed."""
    evidence = copy.deepcopy(BASE)
    evidence["runs"][0]["context_backends"] = ["nccl", "trtllm_oneshot"]
    loaded = load_evidence(_written(tmp_path, evidence))
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
    assert load_evidence(_written(tmp_path, evidence))["runs"][0]["session"] == session


def test_after_sizes_of_one_entry_is_read_without_after_larger_us(tmp_path: Path) -> None:
    evidence = copy.deepcopy(BASE)
    _, result = _transitioned(evidence)
    result["after_sizes"] = result["after_sizes"][:1]
    del result["after_larger_us"]
    assert load_evidence(_written(tmp_path, evidence))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_malformed_v12_field_is_refused_naming_it(tmp_path: Path, name: str) -> None:
    edit, expected = REFUSED[name]
    evidence = copy.deepcopy(BASE)
    edit(evidence)
    index, result = _transitioned(BASE)
    entries = len(result["after_sizes"])
    expected = expected.format(last=entries - 1, extra=entries)
    with pytest.raises(EvidenceError) as caught:
        load_evidence(_written(tmp_path, evidence))
    message = str(caught.value)
    assert "\n" not in message and expected in message
    if expected.startswith(("after_sizes", "after_larger_us", "graph_calls")):
        assert f"runs[0].results[{index}].{expected}" in message
