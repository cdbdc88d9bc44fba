"""``benchmarks/decode_step.py`` run for real: two gloo ranks it starts itself, tiny shapes, ``--routes``
for the default and the plan. Asserts what ran and what was written, never how fast (CPU timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "decode_step.py"
ROUTES = json.dumps(
    {
        "default": {"allreduce_rmsnorm": [[None, "gloo"]]},
        "plan": {"allreduce_rmsnorm": [[1, "gloo_ring+rmsnorm"], [None, "gloo"]]},
    }
)
ROUNDS = 15


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env={**environ, **(env or {})}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_default_and_plan_per_size_and_the_mixed_sequence_checked_and_sampled(tmp_path: Path) -> None:
    out = tmp_path / "decode-step.json"
    done = _run(
        "--device", "cpu", "--nproc", "2", "--hidden", "32", "--layers", "1", "--tokens", "1,4",
        "--prefill", "4", "--batch", "1", "--decodes", "2", "--steps-per-replay", "2", "--warmup", "1",
        "--rounds", str(ROUNDS), "--nccl", "--routes", ROUTES, "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert (result["world_size"], result["sites"], result["env"]["NCCL_NVLS_ENABLE"]) == (2, 2, "0")
    (launcher,) = result["launchers"]
    cases = {case["case"]: case for case in launcher["cases"]}
    assert list(cases) == ["1", "4", "mixed 4+2x1"]
    assert cases["mixed 4+2x1"]["steps"] == [4, 1, 1]
    expected_names = {
        "1": {"default": ["gloo"], "plan": ["gloo_ring+rmsnorm"], "nccl": ["gloo"]},
        "4": {"default": ["gloo"], "plan": ["gloo"], "nccl": ["gloo"]},
        "mixed 4+2x1": {
            "default": ["gloo"] * 3, "plan": ["gloo", "gloo_ring+rmsnorm", "gloo_ring+rmsnorm"],
            "nccl": ["gloo"] * 3,
        },
    }  # fmt: skip
    for label, case in cases.items():
        for config, entry in case["configs"].items():
            assert entry["names"] == expected_names[label][config]
            assert entry["status"] == "ok" and entry["check"]["ok"] is True, entry
            assert len(entry["samples_us"]) == ROUNDS and all(s > 0 for s in entry["samples_us"])
        assert set(case["compared"]) == {"plan", "nccl"}
        assert case["estimate"] is None  # no --profile: nothing to price with
        ratio, low, high = case["compared"]["plan"]["over_default"]
        assert low <= ratio <= high
    assert "same path" in cases["4"]["compared"]["plan"]["verdict"]
    assert "no estimate" in cases["1"]["compared"]["plan"]["verdict"]
    assert "routes: plan --routes" in done.stdout and "mixed 4+2x1" in done.stdout


def test_a_caller_that_turns_multicast_on_is_refused_before_any_rank_starts(tmp_path: Path) -> None:
    done = _run(
        "--device", "cpu", "--hidden", "32", "--routes", ROUTES, env={"NCCL_NVLS_ENABLE": "1"}, timeout=120
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.startswith("decode_step: error: NCCL_NVLS_ENABLE=1 set") and done.stderr.count("\n") == 1
    )


def test_fewer_rounds_than_the_method_needs_is_a_usage_error() -> None:
    done = _run("--device", "cpu", "--hidden", "32", "--routes", ROUTES, "--rounds", "5", timeout=120)
    assert done.returncode == 2 and "--rounds must be >= 15" in done.stderr
