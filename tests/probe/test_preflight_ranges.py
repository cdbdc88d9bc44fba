"""The preflight's arithmetic (``probe/preflight.py``), on routes chosen for their byte edges: a route's
byte ranges become token ranges of whole rows of the served model (a token of ``hidden x itemsize``
bytes is in a range when all its bytes are below the range's limit), neighbours that say the same are
one row, and what is above the run's ladder names the ``--max-tokens`` that reaches it.

The node is the bundled 2x H200 capture (one TP2 group, SM 9.0), or an A100 PCIe capture with one of
its two NVLink bridges gone, which gives two TP2 group classes; the routes are plain entries in the
form ``default_routes`` returns, so each edge is exactly where a test puts it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from topo_gate.probe.node import NodeFacts, cpu_node, facts_from_topology
from topo_gate.probe.preflight import CPU_WHY, NO_SM_WHY, NO_TRIAL, PreflightRow, preflight
from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN
from topo_gate.topology.capture import capture_from_dict
from topo_gate.topology.model import build_node

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json"
A100_BRIDGED = REPO / "tests" / "fixtures" / "captures" / "a100-pcie-nvlink-bridge-x4.synthetic.json"
TRIALS = {"a": None, "b": None, "c": None, "nccl": None}
Limits = Sequence[tuple[int | None, str | None]]


def _bundled_facts() -> NodeFacts:
    capture = json.loads(BUNDLED.read_text())["node"]["capture"]
    return facts_from_topology(build_node(capture_from_dict(capture, "node.capture")), command=None)


def _two_class_facts() -> NodeFacts:
    """4x A100 PCIe whose GPU2-GPU3 bridge is gone: TP2 groups (0, 1) over NVLink, (2, 3) over PCIe."""
    data = json.loads(A100_BRIDGED.read_text())
    for gpu in data["gpus"][2:]:
        gpu["nvlinks"], gpu["nvlink_link_count"] = [], 0
    for pair in data["pairs"]:
        if (pair["a"], pair["b"]) == (2, 3):
            pair["p2p_nvlink"] = 5  # NVML: not supported
    facts = facts_from_topology(build_node(capture_from_dict(data, "capture")), command=None)
    assert [(g.group_class, g.gpus) for g in facts.planner.tp_groups(2)] == [
        ("nvlink", (0, 1)),
        ("node", (2, 3)),
    ]
    return facts


class _Routes:
    """A launcher's default routes as ``default_routes`` returns them, one entry with ``limits`` for
    every pattern; it keeps what it was asked."""

    def __init__(self, limits: Limits, launcher: str = "vllm") -> None:
        self.limits, self.launcher = limits, launcher
        self.asked: list[dict[str, Any]] = []

    def __call__(self, **asked: Any) -> list[dict[str, Any]]:
        self.asked.append(asked)
        routes = {pattern: list(self.limits) for pattern in (PLAIN_PATTERN, FUSED_PATTERN)}
        return [{"launcher": self.launcher, "release": "1", "variants": [], "nccl": "nccl", "routes": routes}]


def _run(
    limits: Limits,
    *,
    row_bytes: int = 10,
    max_tokens: int = 8192,
    backends: Mapping[str, str | None] = TRIALS,
    patterns: Sequence[str] = (PLAIN_PATTERN,),
    facts: NodeFacts | None = None,
    tps: Sequence[int] = (2,),
    device: str = "cuda",
    routes: _Routes | None = None,
) -> tuple[PreflightRow, ...]:
    return preflight(
        facts or _bundled_facts(), tps, hidden=row_bytes, itemsize=1, model=None, patterns=patterns,
        backends=backends, routes=routes or _Routes(limits), max_tokens=dict.fromkeys(tps, max_tokens),
        device=device,
    )  # fmt: skip


def _cut(limits: Limits, **options: Any) -> list[tuple[int, int | None, str, bool]]:
    return [(r.min_tokens, r.max_tokens, r.path, r.timed) for r in _run(limits, **options)]


def test_a_limit_on_a_row_boundary_ends_one_range_and_starts_the_next_on_the_next_token() -> None:
    # 30 bytes of 10-byte rows: tokens 1-2 are below it, token 3 (30 bytes) is not.
    assert _cut([(30, "a"), (None, "b")]) == [(1, 2, "a", True), (3, None, "b", True)]


def test_a_limit_one_byte_past_a_row_boundary_holds_that_row() -> None:
    assert _cut([(31, "a"), (None, "b")]) == [(1, 3, "a", True), (4, None, "b", True)]


def test_one_byte_rows_start_at_one_token() -> None:
    assert _cut([(3, "a"), (None, "b")], row_bytes=1) == [(1, 2, "a", True), (3, None, "b", True)]


def test_an_open_ended_route_is_one_row_to_every_larger_size() -> None:
    assert _cut([(None, "a")]) == [(1, None, "a", True)]


def test_a_range_narrower_than_a_row_holds_no_token_and_makes_no_row() -> None:
    assert _cut([(5, "a"), (None, "b")]) == [(1, None, "b", True)]


def test_a_range_of_exactly_one_row_is_kept() -> None:
    assert _cut([(10, "a"), (20, "b"), (None, "c")]) == [(1, 1, "b", True), (2, None, "c", True)]


def test_a_zero_byte_limit_leaves_the_next_range_starting_at_one_token() -> None:
    # A launcher whose fast path is sized to nothing: the next path holds from the first token.
    assert _cut([(0, "a"), (None, "b")]) == [(1, None, "b", True)]


def test_neighbours_that_say_the_same_are_one_row_and_the_others_stay_apart() -> None:
    limits = [(20, "a"), (40, "b"), (60, "c"), (80, "c"), (None, "nccl")]
    assert _cut(limits) == [(1, 1, "a", True), (2, 3, "b", True), (4, 7, "c", True), (8, None, "nccl", True)]


def test_neighbours_with_one_path_but_different_verdicts_stay_apart() -> None:
    # Tokens 1-4 are on the ladder (at most 4), 5-7 are not: one path, two verdicts.
    rows = _run([(50, "a"), (80, "a"), (None, "b")], max_tokens=4)
    assert [(r.min_tokens, r.max_tokens, r.path, r.timed) for r in rows] == [
        (1, 4, "a", True), (5, 7, "a", False), (8, None, "b", False),
    ]  # fmt: skip


def test_the_largest_size_the_ladder_measures_is_timed() -> None:
    assert _cut([(40, "a"), (None, "b")], max_tokens=4) == [(1, 3, "a", True), (4, None, "b", True)]


@pytest.mark.parametrize(("first", "larger"), [(513, 1024), (1024, 1024), (1025, 2048)])
def test_a_range_above_the_ladder_names_the_power_of_two_that_reaches_its_first_token(
    first: int, larger: int
) -> None:
    above = _run([((first - 1) * 10 + 1, "a"), (None, "b")], max_tokens=512)[-1]
    assert (above.min_tokens, above.timed, above.action) == (first, False, f"--max-tokens {larger}")
    assert above.why == "above this run's largest size (512 tokens)"


def test_a_path_no_trial_times_and_no_known_cause_explains_says_so() -> None:
    row = _run([(None, "a_path_of_no_trial")])[0]
    assert (row.path, row.timed, row.why, row.action) == ("a_path_of_no_trial", False, NO_TRIAL, None)


def test_the_norm_site_times_a_plain_backend_by_its_rmsnorm_composite() -> None:
    # The patterns as the CLI splits them out of --patterns: strings made at run time, not literals.
    patterns = tuple(",".join((PLAIN_PATTERN, FUSED_PATTERN)).split(","))
    rows = _run([(None, "a")], patterns=patterns, backends={"a": None, "a+rmsnorm": None})
    assert [(r.pattern, r.path) for r in rows] == [(PLAIN_PATTERN, "a"), (FUSED_PATTERN, "a+rmsnorm")]


def test_tp1_has_no_all_reduce_and_no_rows() -> None:
    routes = _Routes([(None, "a")])
    rows = _run([], tps=(1, 2), routes=routes)
    assert [asked["tp"] for asked in routes.asked] == [2]
    assert {r.tp for r in rows} == {2}


def test_the_cpu_harness_has_no_rows_below_tp2_either() -> None:
    # The harness node answers a group for any size it is asked (even 0 ranks): the preflight must not ask.
    rows = preflight(
        cpu_node([2]), [0, 1, 2], hidden=10, itemsize=1, model=None, patterns=(PLAIN_PATTERN,), backends={},
        routes=_Routes([]), max_tokens={0: 8, 1: 8, 2: 8}, device="cpu",
    )  # fmt: skip
    assert [(r.tp, r.why) for r in rows] == [(2, CPU_WHY)]


def test_a_cuda_device_named_at_run_time_gets_the_launcher_routes() -> None:
    device = "".join(("cu", "da"))  # as read from a command line: equal to "cuda", not the same object
    assert _cut([(None, "a")], device=device) == [(1, None, "a", True)]


def test_on_the_cpu_harness_every_group_class_gets_its_rows() -> None:
    rows = _run([(None, "a")], facts=_two_class_facts(), device="cpu")
    assert [(r.group_class, r.launcher, r.min_tokens, r.max_tokens, r.timed, r.why) for r in rows] == [
        ("nvlink", "any launcher", 1, None, False, CPU_WHY), ("node", "any launcher", 1, None, False, CPU_WHY),
    ]  # fmt: skip


def test_a_group_without_a_known_sm_does_not_hide_the_next_group_class() -> None:
    facts = dataclasses.replace(_two_class_facts(), capabilities={2: (8, 0), 3: (8, 0)})
    routes = _Routes([(None, "a")])
    rows = _run([], facts=facts, routes=routes)
    assert [(r.group_class, r.launcher, r.min_tokens, r.max_tokens, r.path, r.why) for r in rows] == [
        ("nvlink", "any launcher", 1, None, "-", NO_SM_WHY), ("node", "vllm", 1, None, "a", None),
    ]  # fmt: skip
    assert [(asked["group_class"], asked["capability"]) for asked in routes.asked] == [("node", (8, 0))]


def test_the_group_capability_is_its_first_gpus() -> None:
    facts = dataclasses.replace(_bundled_facts(), capabilities={0: (9, 0)})
    routes = _Routes([(None, "a")])
    assert [r.path for r in _run([], facts=facts, routes=routes)] == ["a"]
    assert [asked["capability"] for asked in routes.asked] == [(9, 0)]


def test_a_refused_group_is_one_row_from_the_first_token_on() -> None:
    def refusing(**_: object) -> list[dict[str, object]]:
        return [{"launcher": "vllm", "release": "1", "variants": [], "refused": "no P2P"}]

    rows = preflight(
        _bundled_facts(), [2], hidden=10, itemsize=1, model=None, patterns=(PLAIN_PATTERN,), backends={},
        routes=refusing, max_tokens={2: 8192}, device="cuda",
    )  # fmt: skip
    assert [(r.min_tokens, r.max_tokens, r.path, r.timed) for r in rows] == [(1, None, "refused", False)]


def test_a_row_cannot_be_changed_once_made() -> None:
    row = _run([(None, "a")])[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.timed = False  # type: ignore[misc]
