"""Workloads at their edges: the documented limits exactly met and one past, the presets' exact
steps and words, and which name ``serving`` becomes at which TP size (topo_gate/launchers/plan/workload.py)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from topo_gate.launchers.plan.workload import (
    MAX_STEPS,
    MAX_TOKENS,
    MAX_WORKLOAD_BYTES,
    PRESETS,
    WIDE_SERVING,
    Workload,
    WorkloadError,
    lookup_workload,
)


def _file_of(tmp_path: Path, size: int) -> Path:
    """A valid workload file of exactly ``size`` bytes (padded with a comment)."""
    head = "steps: {1: 1}\n#"
    path = tmp_path / "padded.yaml"
    path.write_text(head + "x" * (size - len(head) - 1) + "\n")
    assert path.stat().st_size == size
    return path


def test_the_documented_limits() -> None:
    # The words a user reads name these numbers; the tests below hold the code to them.
    assert (MAX_WORKLOAD_BYTES, MAX_STEPS, MAX_TOKENS) == (65536, 4096, 1048576)


@pytest.mark.parametrize(("size", "read"), [(65535, True), (65536, True), (65537, False)])
def test_a_workload_file_is_read_up_to_64_kib(tmp_path: Path, size: int, read: bool) -> None:
    path = _file_of(tmp_path, size)
    if read:
        assert lookup_workload(str(path)).steps == ((1, 1.0),)
    else:
        with pytest.raises(WorkloadError, match=str(path)):
            lookup_workload(str(path))


@pytest.mark.parametrize(
    ("count", "allowed"), [(1, True), (4095, True), (4096, True), (4097, False), (5000, False)]
)
def test_at_most_4096_token_counts(count: int, allowed: bool) -> None:
    weights = {tokens: 1.0 for tokens in range(1, count + 1)}
    if allowed:
        assert len(Workload.from_weights("many", weights).steps) == count
    else:
        with pytest.raises(WorkloadError, match="more than 4096 token counts"):
            Workload.from_weights("many", weights)


@pytest.mark.parametrize(
    ("tokens", "allowed"), [(1, True), (1048575, True), (1048576, True), (1048577, False)]
)
def test_a_step_carries_at_most_a_million_tokens(tokens: int, allowed: bool) -> None:
    if allowed:
        assert Workload.from_weights("big", {tokens: 1.0}).max_tokens == tokens
    else:
        with pytest.raises(WorkloadError, match=r"not an integer in 1\.\.1048576"):
            Workload.from_weights("big", {tokens: 1.0})


@pytest.mark.parametrize(
    "steps",
    [
        ((8, 0.5), (1, 0.5)),  # descending
        ((1, 0.25), (8, 0.5), (4, 0.25)),  # a later count smaller
        ((1, 0.25), (1, 0.25), (2, 0.5)),  # a repeated count, ascending otherwise
    ],
    ids=["descending", "out of order", "repeated"],
)
def test_steps_built_directly_must_be_distinct_and_ascending(steps: tuple[tuple[int, float], ...]) -> None:
    with pytest.raises(WorkloadError, match="distinct and ascending"):
        Workload("direct", steps)


def test_the_largest_step_is_the_last_of_the_ascending_steps() -> None:
    assert Workload.from_weights("mix", {64: 1, 1: 1, 8: 1}).max_tokens == 64
    assert Workload.from_weights("one", {8: 1}).max_tokens == 8


def test_a_workload_is_a_value_that_cannot_be_changed() -> None:
    # The presets are module-level and shared by every plan: one caller changing one would change all.
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["serving"].steps = ((1, 1.0),)  # type: ignore[misc]


def test_the_serving_preset_is_worded_for_its_largest_batch() -> None:
    assert "batch 1, 2, 4, ..., 256 (equal weights)" in PRESETS["serving"].description
    assert "batch 1, 2, 4, ..., 512 (equal weights)" in WIDE_SERVING.description


def test_the_prefill_preset_is_the_four_chunk_sizes_with_equal_weights() -> None:
    assert PRESETS["prefill"].steps == ((1024, 0.25), (2048, 0.25), (4096, 0.25), (8192, 0.25))


@pytest.mark.parametrize(("tp", "largest"), [(None, 256), (1, 256), (3, 256), (4, 512), (8, 512)])
def test_serving_decodes_up_to_512_from_tp_4(tp: int | None, largest: int) -> None:
    # A name as it arrives from the command line: a string built at run time, not the literal.
    name = "".join(["serv", "ing"])
    serving = lookup_workload(name, tp=tp)
    assert max(t for t, _ in serving.steps if t < 2048) == largest


@pytest.mark.parametrize("name", ["decode", "prefill"])
def test_the_other_presets_do_not_follow_the_tp_size(name: str) -> None:
    assert lookup_workload(name, tp=8) is PRESETS[name]


def test_a_file_named_without_a_directory_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "w.yaml" sorts after "serving": only the name itself may pick the preset.
    monkeypatch.chdir(tmp_path)
    Path("w.yaml").write_text("name: mine\nsteps: {1: 1, 8: 3}\n")
    assert lookup_workload("w.yaml", tp=4).steps == ((1, 0.25), (8, 0.75))


def test_a_missing_path_is_a_file_that_cannot_be_read_not_an_unknown_preset(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(WorkloadError) as caught:
        lookup_workload(str(missing))
    message = str(caught.value)
    assert str(missing) in message and "unknown workload" not in message
    assert os.sep in str(missing)


@pytest.mark.parametrize("weight", ["3", None, True, float("inf"), float("nan")], ids=repr)
def test_a_weight_that_is_no_finite_number_is_refused_by_name(weight: object) -> None:
    with pytest.raises(WorkloadError, match=r"weight .* of 8 tokens is not a finite number"):
        Workload.from_weights("odd", {1: 1.0, 8: weight})  # type: ignore[dict-item]
