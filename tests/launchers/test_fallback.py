"""A profile that cannot be used changes nothing: the launcher runs its own defaults, and the plan says
why. ``fallback="nccl"`` forces NCCL instead, with each launcher's NCCL-forcing knobs.

Every way a profile can be unusable is tried on a profile whose plan, on its own node, has knobs
(knob_cases.py), so a fallback that emits nothing is not mistaken for a plan that saves nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from knob_cases import BY_NAME, KnobCase
from priced_profiles import FINGERPRINT

from topo_gate.launchers import PLANNERS, PlanRequest, plan_without_profile, sglang, trtllm, vllm
from topo_gate.profile import dump_profile

OTHER_NODE = "sha256:" + "cd" * 32
#: Per launcher, a node where its plan has knobs.
WINNING = {
    "sglang": BY_NAME["sglang-custom-off"],
    "vllm": BY_NAME["vllm-custom-off"],
    "trtllm": BY_NAME["trtllm-nccl"],
}
FORCED = {"sglang": sglang.FORCE_NCCL, "vllm": vllm.FORCE_NCCL, "trtllm": trtllm.FORCE_NCCL}


def _missing(tmp_path: Path, case: KnobCase) -> tuple[Path, dict]:
    return tmp_path / "absent.yaml", {}


def _invalid(tmp_path: Path, case: KnobCase) -> tuple[Path, dict]:
    path = tmp_path / "invalid.yaml"
    path.write_text("schema: topo-gate/profile/v1\ndecisions: 3\n")
    return path, {}


def _tampered(tmp_path: Path, case: KnobCase) -> tuple[Path, dict]:
    path = case.write(tmp_path / "profile.yaml")
    text = path.read_text()
    assert "2026-12-01T08:00:00Z" in text
    path.write_text(text.replace("2026-12-01T08:00:00Z", "2026-12-02T08:00:00Z"))  # the old digest stays
    return path, {}


def _foreign(tmp_path: Path, case: KnobCase) -> tuple[Path, dict]:
    return case.write(tmp_path / "profile.yaml"), {"fingerprint": OTHER_NODE}


def _tp_not_measured(tmp_path: Path, case: KnobCase) -> tuple[Path, dict]:
    return case.write(tmp_path / "profile.yaml"), {"tp": 8}


def _too_new(tmp_path: Path, case: KnobCase) -> tuple[Path, dict]:
    path = case.write(tmp_path / "profile.yaml")
    path.write_text(path.read_text().replace("topo-gate/profile/v1.3", "topo-gate/profile/v2"))
    return path, {}


def _no_price_table(tmp_path: Path, case: KnobCase) -> tuple[Path, dict]:
    # A v1.2 profile: the same decisions, no measurement table to price the default with.
    old = dataclasses.replace(case.profile(), schema="topo-gate/profile/v1.2", measurements=()).with_digest()
    path = tmp_path / "v12.yaml"
    dump_profile(old, path)
    return path, {}


BROKEN = [_missing, _invalid, _tampered, _foreign, _tp_not_measured, _too_new, _no_price_table]
REASONS = {
    "missing": "no such file",
    "invalid": "unusable",
    "tampered": "digest",
    "foreign": "fingerprint",
    "tp_not_measured": "TP 8",
    "too_new": "unknown schema major 2",
    "no_price_table": "no measurement table for TP 2",
}


def _plan(launcher: str, broken, tmp_path: Path, **kwargs):
    case = WINNING[launcher]
    path, overrides = broken(tmp_path, case)
    return case.plan(str(path), **{**overrides, **kwargs})


@pytest.mark.parametrize("launcher", list(PLANNERS))
@pytest.mark.parametrize("broken", BROKEN, ids=lambda f: f.__name__.strip("_"))
def test_an_unusable_profile_changes_nothing_and_says_why(launcher, broken, tmp_path) -> None:
    plan = _plan(launcher, broken, tmp_path)
    assert plan.fallback
    assert REASONS[broken.__name__.strip("_")] in plan.reason
    assert (plan.args, dict(plan.env), dict(plan.config), plan.estimate) == ((), {}, {}, "")
    assert plan.notes[-1] == (
        "nothing changed: the launcher runs its own defaults (--fallback nccl forces NCCL instead)"
    )


@pytest.mark.parametrize("launcher", list(PLANNERS))
@pytest.mark.parametrize("broken", BROKEN, ids=lambda f: f.__name__.strip("_"))
def test_fallback_nccl_forces_nccl_on_an_unusable_profile(launcher, broken, tmp_path) -> None:
    plan = _plan(launcher, broken, tmp_path, fallback="nccl")
    assert plan.fallback and REASONS[broken.__name__.strip("_")] in plan.reason
    assert plan.args == FORCED[launcher].args
    assert dict(plan.env) == dict(FORCED[launcher].env)
    assert dict(plan.config) == dict(FORCED[launcher].config)
    assert plan.notes[-1] == FORCED[launcher].notes[-1] and "NCCL forced (--fallback nccl)" in plan.notes[-1]


@pytest.mark.parametrize("launcher", list(PLANNERS))
def test_the_same_profile_is_followed_on_its_node(launcher, tmp_path) -> None:
    # The control for the cases above: unbroken, the profile gives a plan with knobs (not a fallback).
    case = WINNING[launcher]
    plan = case.plan(str(case.write(tmp_path / "profile.yaml")))
    assert not plan.fallback and plan.reason == "following the profile"
    assert (plan.args, dict(plan.env), dict(plan.config)) == (case.args, dict(case.env), dict(case.config))
    assert plan.estimate.startswith("plan: ") and ": est. -" in plan.estimate


@pytest.mark.parametrize("launcher", sorted(PLANNERS))
def test_an_unverified_node_falls_back_unless_trusted_and_strict_refuses(
    monkeypatch, launcher: str, tmp_path
) -> None:
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)
    case = WINNING[launcher]
    path = str(case.write(tmp_path / "profile.yaml"))
    unverified = case.plan(path, fingerprint=None)
    assert unverified.fallback and "node not verified" in unverified.reason
    assert (unverified.args, dict(unverified.env), dict(unverified.config)) == ((), {}, {})
    trusted = case.plan(path, fingerprint=None, trust_unverified_node=True)
    assert not trusted.fallback and any("not verified" in note for note in trusted.notes)
    assert (trusted.args, dict(trusted.env), dict(trusted.config)) == (
        case.args,
        dict(case.env),
        dict(case.config),
    )
    assert case.plan(path, fingerprint=None, strict=True, trust_unverified_node=True).fallback


@pytest.mark.parametrize("launcher", list(PLANNERS))
def test_nccl_plan_without_a_profile(launcher: str) -> None:
    plan = plan_without_profile(launcher, "no NVIDIA driver")
    assert plan.fallback and plan.reason == "no NVIDIA driver" and plan.args == FORCED[launcher].args
    quiet = plan_without_profile(launcher, "no NVIDIA driver", fallback="launcher-default")
    assert quiet.fallback and (quiet.args, dict(quiet.env), dict(quiet.config)) == ((), {}, {})


def test_a_bad_fallback_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="fallback must be"):
        PLANNERS["vllm"](PlanRequest("x.yaml", tp=2, fallback="auto"))
    with pytest.raises(ValueError, match="fallback must be"):
        plan_without_profile("vllm", "why", fallback="auto")


def test_the_plan_at_fingerprint_is_followed_only_there(tmp_path) -> None:
    # One profile, two nodes: the plan on its own node, nothing (the default) on another.
    case = WINNING["sglang"]
    path = str(case.write(tmp_path / "profile.yaml"))
    assert case.plan(path, fingerprint=FINGERPRINT).args == case.args
    elsewhere = case.plan(path, fingerprint=OTHER_NODE)
    assert elsewhere.fallback and elsewhere.args == ()
