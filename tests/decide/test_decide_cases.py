"""Decision cases as data files (like black's): ``cases/*.json`` each hold evidence and the rules
it must produce.  Add a case by dropping a file; its ``description`` says what it pins down."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo_gate.decide import decide

CASES = sorted((Path(__file__).parent / "cases").glob("*.json"))


def load_case(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_case(path: Path):
    case = load_case(path)
    result = decide(case["evidence"], **case["options"])

    got = [
        (entry.tp, entry.group_class, entry.pattern, [(rule.max_bytes, rule.backend) for rule in entry.rules])
        for entry in result.decisions
    ]
    want = [
        (
            entry["tp"],
            entry["group_class"],
            entry["pattern"],
            [(r["max_bytes"], r["backend"]) for r in entry["rules"]],
        )
        for entry in case["expected"]
    ]
    assert got == want, case["description"]

    for entry, expected in zip(result.decisions, case["expected"], strict=True):
        for rule, expected_rule in zip(entry.rules, expected["rules"], strict=True):
            assert expected_rule.get("reason_contains", "") in rule.reason
            # Schema v1.1: the other backends clear of the bar at every size of the range, fastest first.
            got_alternatives = [alternative.backend for alternative in rule.alternatives]
            assert got_alternatives == expected_rule.get("alternatives", []), (rule, case["description"])
    for fragment in case["notes_contain"]:
        assert any(fragment in note for note in result.notes), (fragment, result.notes)


def test_the_seed_lesson_is_among_the_cases():
    # The reason topo-gate exists (DESIGN.md): a TP2 win must not leak into TP4 on the same node.
    case = load_case(Path(__file__).parent / "cases" / "seed_lesson_pcie_tp2_wins_tp4_loses.json")
    by_tp = {entry.tp: entry for entry in decide(case["evidence"]).decisions}
    assert by_tp[2].rules[0].backend == "trtllm_oneshot"
    assert [rule.backend for rule in by_tp[4].rules] == ["nccl"]


def test_rules_state_speedup_ci_and_reason():
    case = load_case(Path(__file__).parent / "cases" / "nvswitch_ladder_oneshot_twoshot_nccl.json")
    oneshot, twoshot, tail = decide(case["evidence"]).decisions[0].rules
    # The rule's speedup is its weakest size (16 tokens: 16.0 / 5.0 us), with the CI around it.
    assert oneshot.speedup == pytest.approx(3.2, rel=0.02)
    assert oneshot.ci[0] <= oneshot.speedup <= oneshot.ci[1]
    assert "weakest 3.20x" in oneshot.reason and "224 KiB" in oneshot.reason
    assert twoshot.speedup > 1.05 and twoshot.ci[0] >= 1.05
    assert tail.speedup is None and tail.ci is None and "56 MiB, the largest size measured" in tail.reason
