"""Helpers for driving ``topo-gate ab`` with the stand-in benchmark (``data/fake_bench.py``) under the names the
real benchmarks have: ``vllm``, ``trtllm-bench``, ``python -m sglang.benchmark.one_batch``.

The profiles are the launcher tests' knob cases (``tests/launchers/knob_cases.py``): nodes whose price
tables make each launcher's plan carry knobs, written once per session (``conftest.py``). The node is
given by the cases' fingerprint, so no GPU is needed. Which arm the stand-in is in follows from what
the planner's real plan changes (``PricedNode.arm_markers``): the test never tells the benchmark its arm.

The bundled 2x H200 profile plans no knob for any launcher (its launchers' defaults were not measured
there, so nothing measured beats them): it stays for what holds without a knob (the node read from its
recorded capture, ab with nothing to compare).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from knob_cases import KnobCase
from priced_profiles import FINGERPRINT

from topo_gate.ab.arms import plan_arm
from topo_gate.launchers import LaunchPlan, PlanRequest, plan_without_profile
from topo_gate.profile import load_profile

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
FAKE = DATA / "fake_bench.py"
BUNDLED_PROFILE = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
BUNDLED_FINGERPRINT = load_profile(BUNDLED_PROFILE).node.fingerprint
CAPTURE = REPO / "tests" / "fixtures" / "captures" / "h200-x2.real.json"

#: Per launcher, the knob case ab is tested on: one whose plan differs from the NCCL-forcing plan in a
#: knob the stand-in can see, where the launcher has one (SGLang: PCIe IPC on, not off; TRT-LLM:
#: TWOSHOT, not NCCL). vLLM has none at TP2: each vLLM case's knob is a flag the NCCL plan passes too
#: (``--compilation-config``, with other JSON) or an env value it sets alike; its case is the one whose
#: plan writes a ``--compilation-config`` for ab to merge into the user's.
CASE_FOR = {"sglang": "sglang-pcie-ipc", "vllm": "vllm-fusion-size", "trtllm": "trtllm-twoshot"}

#: A command of each launcher's benchmark naming no knob, for a plan outside a CMD.
COMMANDS = {
    "sglang": ("python", "-m", "sglang.benchmark.one_batch", "--model-path", "M", "--tp-size", "2"),
    "vllm": ("vllm", "bench", "latency", "--model", "M", "-tp", "2"),
    "trtllm": ("trtllm-bench", "--model", "M", "throughput", "--tp", "2"),
}


def _differs(plan: LaunchPlan, other: LaunchPlan | None) -> dict[str, Any] | None:
    """A knob ``plan`` sets that ``other`` does not: an env value, a flag, a config key."""
    for key, value in plan.env.items():
        if other is None or other.env.get(key) != value:
            return {"env": {key: value}}
    for arg in plan.args:
        if arg.startswith("-") and (other is None or arg not in other.args):
            return {"args": [arg]}
    for key, value in plan.config.items():
        if other is None or other.config.get(key) != value:
            return {"config": {key: value}}
    return None


@dataclass(frozen=True)
class PricedNode:
    """A knob case's profile on disk, and what ``topo-gate ab`` is told about its node and model."""

    case: KnobCase
    profile: Path

    @property
    def launcher(self) -> str:
        return self.case.launcher

    def args(self) -> list[str]:
        """``--profile``, the node and the served model (the case's token limits are the model's)."""
        return ["--profile", str(self.profile), "--node-fingerprint", FINGERPRINT, "--model", self.case.model]

    def planned(self, cmd: Sequence[str] | None = None) -> LaunchPlan:
        """The plan ``topo-gate ab`` builds for ``cmd`` in this process's environment (ab's user env)."""
        request = PlanRequest(
            str(self.profile),
            tp=self.case.tp,
            model=self.case.model,
            fingerprint=FINGERPRINT,
            user_args=tuple(cmd or COMMANDS[self.launcher]),
            user_env=os.environ,
        )
        plan = plan_arm(self.launcher, request)
        assert plan.args or plan.env or plan.config, (
            f"{self.case.name}: the plan adds no knob here (the case's user env: {dict(self.case.user_env)}); "
            f"{plan.notes}"
        )
        return plan

    def arm_markers(self) -> tuple[list[dict[str, Any]], bool]:
        """The stand-in's arm matchers, and whether the nccl arm can be told apart from the plan."""
        plan, forced = self.planned(), plan_without_profile(self.launcher, "test")
        plan_only, nccl_only = _differs(plan, forced), _differs(forced, plan)
        if plan_only and nccl_only:
            return [{"arm": "nccl", **nccl_only}, {"arm": "plan", **plan_only}], True
        return [{"arm": "plan", **(_differs(plan, None) or {})}], False


class Bench:
    """Programs named like the real benchmarks, and the scenario the stand-in follows."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.pkgs = tmp_path / "pkgs"
        self.state = tmp_path / "state.json"
        self.pidfile = tmp_path / "bench.pid"
        self._monkeypatch = monkeypatch
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(self.pkgs), str(REPO)]))
        monkeypatch.delenv("TOPO_GATE_PROFILE", raising=False)
        monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)

    def program(self, name: str) -> str:
        """An executable ``bin/<name>`` that is the stand-in."""
        path = self.bin / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
        path.chmod(0o755)
        return str(path)

    def module(self, dotted: str) -> list[str]:
        """``python -m <dotted>`` running the stand-in (a package tree on PYTHONPATH)."""
        folder = self.pkgs
        parts = dotted.split(".")
        for part in parts[:-1]:
            folder = folder / part
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()
        (folder / f"{parts[-1]}.py").write_text(
            f"import runpy\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
        )
        return [sys.executable, "-m", dotted]

    def scenario(self, **fields: Any) -> dict[str, Any]:
        scenario = {"state": str(self.state), "pidfile": str(self.pidfile), **fields}
        path = self.root / "scenario.json"
        path.write_text(json.dumps(scenario))
        self._monkeypatch.setenv("FAKE_BENCH_SCENARIO", str(path))
        return scenario

    def seen(self) -> list[dict[str, Any]]:
        """Every call of the stand-in: its arm, call number, argv and launcher env."""
        if not self.state.exists():
            return []
        return json.loads(self.state.read_text())["seen"]


def record_method(logs: str, *, runs: int) -> dict[str, Any]:
    """A record's ``method`` as ``topo-gate ab`` writes it with its defaults: ``runs`` runs an arm, its
    logs under ``logs``."""
    return {
        "runs": runs,
        "warmups": 0,
        "order": "alternate",
        "seed": 0,
        "margin": 0.02,
        "ci_level": 0.95,
        "bootstrap": 2000,
        "timeout_s": None,
        "logs": logs,
    }
