"""A sharded mutation run (``--shard K/N``) judges each mutant in exactly one shard, and
``mutation_report.py --shards`` joins the shards into the one whole run they share."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import mutation  # noqa: E402
from mutation_report import joined_shards, markdown  # noqa: E402
from mutation_run import Plan  # noqa: E402
from mutation_scope import Budget  # noqa: E402


def test_the_shards_split_the_order_without_overlap_or_gap() -> None:
    order = list(range(23))
    parts = [Plan(None, Budget(None, 1, 1), 0, (k, 4)).in_shard(order) for k in range(4)]
    assert sorted(job for part in parts for job in part) == order
    assert Plan(None, Budget(None, 1, 1), 0).in_shard(order) == order


@pytest.mark.parametrize("text", ["4/4", "-1/2", "1", "a/b", "1/0"])
def test_a_shard_outside_its_count_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        mutation.shard_of(text)


def _shard(k: int, n: int, outcomes: list[str], commit: str = "abc") -> dict[str, Any]:
    mutants = [
        {"module": "m.py", "line": 10 * k + i, "operator": "core/X@0", "function": "f", "source": "x",
         "outcome": outcome, "diff": "", "killed_by": "", "why": ""}
        for i, outcome in enumerate(outcomes)
    ]  # fmt: skip
    return {
        "command": f"scripts/mutation.sh --jobs 1 --shard {k}/{n} m", "commit": commit, "dirty": False,
        "date": "2026-12-06 10:00 UTC", "cosmic_ray": "8.7.0", "python": "3.12", "cpus": 16,
        "load_start": 1.0, "load_end": 2.0, "seconds": 60 * (k + 1), "jobs": 1, "time_cap": None,
        "seed": 0, "shard": f"{k}/{n}",
        "modules": [{"name": "m.py", "module": "m.py", "seconds": 30.0 * (k + 1), "error": None,
                     "scope": "", "mutants": mutants, "skipped": {"in another shard": 2, "annotation": 1}}],
    }  # fmt: skip


def test_joined_shards_are_the_union_of_what_each_judged() -> None:
    run = joined_shards([_shard(1, 2, ["killed", "survived"]), _shard(0, 2, ["killed", "equivalent"])])
    (module,) = run["modules"]
    assert [m["outcome"] for m in module["mutants"]] == ["killed", "equivalent", "killed", "survived"]
    assert module["skipped"] == {"annotation": 2}  # "in another shard" is judged elsewhere
    assert module["seconds"] == 60.0 and run["seconds"] == 120  # side by side: the longest
    assert "--shard K/2 for K in 0..1" in run["command"] and "1/2" not in run["command"]
    assert "| `m.py` | 3 | 2 | 1 | 1 | 0 | 66.7% |" in markdown(run)


@pytest.mark.parametrize(
    "shards",
    [
        [_shard(0, 2, ["killed"]), _shard(0, 2, ["killed"])],  # one shard twice, the other missing
        [_shard(0, 2, ["killed"]), _shard(1, 2, ["killed"], commit="def")],  # two commits
        [_shard(0, 3, ["killed"]), _shard(1, 3, ["killed"])],  # a shard missing
    ],
)
def test_shards_that_are_not_one_whole_run_are_refused(shards: list[dict[str, Any]]) -> None:
    with pytest.raises(SystemExit):
        joined_shards(shards)
