"""Workloads: the presets' documented shares, and workload files read without trusting them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from topo_gate.launchers.plan.workload import (
    DEFAULT_WORKLOAD,
    PRESETS,
    Workload,
    WorkloadError,
    lookup_workload,
)


def test_every_preset_sums_to_one_and_is_ascending() -> None:
    for preset in PRESETS.values():
        assert sum(w for _, w in preset.steps) == pytest.approx(1.0)
        assert [t for t, _ in preset.steps] == sorted({t for t, _ in preset.steps})


def test_the_default_is_serving_with_the_documented_shares() -> None:
    serving = lookup_workload(None)
    assert serving.name == DEFAULT_WORKLOAD == "serving"
    weights = dict(serving.steps)
    assert sum(w for t, w in weights.items() if t <= 256) == pytest.approx(0.9)
    assert weights[2048] == pytest.approx(0.05) and weights[8192] == pytest.approx(0.05)
    assert sorted(weights) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 2048, 8192]


def test_decode_is_log_uniform_up_to_512() -> None:
    assert dict(PRESETS["decode"].steps) == {
        t: pytest.approx(0.1) for t in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    }


def test_a_file_is_normalised(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("name: mine\nsteps: {1: 3, 64: 1}\n")
    workload = lookup_workload(str(path))
    assert workload.name == "mine" and workload.steps == ((1, 0.75), (64, 0.25))


#: Workload files listing their token counts out of order, and the same steps in ascending order: each
#: weight stays with its own token count, whatever order the file lists them in.
OUT_OF_ORDER = {
    "prefill-heavy, descending": ("steps: {8192: 95, 1: 5}\n", {1: 0.05, 8192: 0.95}),
    "prefill-heavy, ascending": ("steps: {1: 5, 8192: 95}\n", {1: 0.05, 8192: 0.95}),
    "block style, descending": ("steps:\n  8192: 95\n  1: 5\n", {1: 0.05, 8192: 0.95}),
    "three sizes, shuffled": ("steps: {64: 1, 1: 2, 8: 1}\n", {1: 0.5, 8: 0.25, 64: 0.25}),
    "three sizes, ascending": ("steps: {1: 2, 8: 1, 64: 1}\n", {1: 0.5, 8: 0.25, 64: 0.25}),
}


@pytest.mark.parametrize(("text", "shares"), OUT_OF_ORDER.values(), ids=OUT_OF_ORDER)
def test_a_files_weights_stay_with_their_token_counts_in_any_order(
    tmp_path: Path, text: str, shares: dict[int, float]
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    workload = lookup_workload(str(path))
    assert [tokens for tokens, _ in workload.steps] == sorted(shares)
    assert dict(workload.steps) == {tokens: pytest.approx(share) for tokens, share in shares.items()}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("steps: {1: 0}\n", "must be > 0"),
        ("steps: {1: -2}\n", "must be > 0"),
        ("steps: {1: .nan}\n", "not a finite number"),
        ("steps: {0: 1}\n", "not an integer in 1.."),
        ("steps: {1.5: 1}\n", "not an integer in 1.."),
        ("steps: {true: 1}\n", "not an integer in 1.."),
        ("steps: {1: 1}\nsteep: 3\n", "unknown key(s) steep"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("steps: {}\n", "no steps"),
        ("steps: {1: [1, 2\n", "not YAML/JSON"),
    ],
)
def test_a_bad_file_is_one_line_naming_it(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(WorkloadError) as caught:
        lookup_workload(str(path))
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and words in message


def test_an_unknown_name_lists_the_presets() -> None:
    with pytest.raises(WorkloadError, match="unknown workload 'chatty'.*serving, decode, prefill"):
        lookup_workload("chatty")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "w.fifo"
    os.mkfifo(fifo)
    with pytest.raises(WorkloadError, match="not a regular file"):
        lookup_workload(str(fifo))


def test_weights_must_sum_to_one_when_built_directly() -> None:
    with pytest.raises(WorkloadError, match="sum to 1"):
        Workload("x", ((1, 0.5),))
