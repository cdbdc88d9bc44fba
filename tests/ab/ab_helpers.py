"""Helpers for driving ``topo-gate ab`` with the stand-in benchmark (``data/fake_bench.py``) under the names the
real benchmarks have: ``vllm``, ``trtllm-bench``, ``python -m sglang.benchmark.one_batch``.

The profile is the bundled 2x H200 one and the node is given by its fingerprint (or its recorded
capture), so no GPU is needed. Which arm the stand-in is in follows from what the planner's real
plan changes (``arm_markers``): the test never tells the benchmark its arm.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from topo_gate.launchers import PLANNERS, LaunchPlan, nccl_plan
from topo_gate.profile import load_profile

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
FAKE = DATA / "fake_bench.py"
PROFILE = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
CAPTURE = REPO / "tests" / "fixtures" / "captures" / "h200-x2.real.json"
FINGERPRINT = load_profile(PROFILE).node.fingerprint


def planned(launcher: str) -> LaunchPlan:
    """The plan ``topo-gate ab`` builds for the bundled profile at TP2 on its own node."""
    plan = PLANNERS[launcher](str(PROFILE), tp=2, fallback="launcher-default", fingerprint=FINGERPRINT)
    assert not plan.fallback, plan.reason
    assert plan.args or plan.env or plan.config, "the bundled profile's plan adds no knob: nothing to A/B"
    return plan


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


def arm_markers(launcher: str) -> tuple[list[dict[str, Any]], bool]:
    """The stand-in's arm matchers, and whether the nccl arm can be told apart from the plan."""
    plan, forced = planned(launcher), nccl_plan(launcher, "test")
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


def node_args() -> list[str]:
    return ["--profile", str(PROFILE), "--node-fingerprint", FINGERPRINT]
