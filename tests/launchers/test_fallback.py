"""Fail closed means *force* NCCL: every unusable profile gives each launcher its NCCL-forcing knobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_profiles import FINGERPRINT, OTHER_NODE

from topo_gate.launchers import PLANNERS, nccl_plan, sglang, trtllm, vllm

WINNING = {
    "allreduce": [
        [67108864, "trtllm_oneshot", ["trtllm_oneshot_sglang", "trtllm_oneshot_vllm"]],
        [None, "nccl"],
    ],
    "allreduce_rmsnorm": [
        [67108864, "trtllm_fused_oneshot", ["trtllm_fused_oneshot_sglang", "trtllm_fused_oneshot_vllm"]],
        [None, "nccl"],
    ],
}
FORCED = {"sglang": sglang.FORCE_NCCL, "vllm": vllm.FORCE_NCCL, "trtllm": trtllm.FORCE_NCCL}


def _missing(tmp_path: Path, write_profile) -> tuple[Path, dict]:
    return tmp_path / "absent.yaml", {}


def _invalid(tmp_path: Path, write_profile) -> tuple[Path, dict]:
    path = tmp_path / "invalid.yaml"
    path.write_text("schema: topo-gate/profile/v1\ndecisions: 3\n")
    return path, {}


def _tampered(tmp_path: Path, write_profile) -> tuple[Path, dict]:
    path = write_profile(WINNING)
    path.write_text(path.read_text().replace("67108864", "134217728"))  # widen a range, keep the old digest
    return path, {}


def _foreign(tmp_path: Path, write_profile) -> tuple[Path, dict]:
    return write_profile(WINNING), {"fingerprint": OTHER_NODE}


def _tp_not_measured(tmp_path: Path, write_profile) -> tuple[Path, dict]:
    return write_profile(WINNING), {"tp": 8}


def _too_new(tmp_path: Path, write_profile) -> tuple[Path, dict]:
    path = write_profile(WINNING)
    path.write_text(path.read_text().replace("topo-gate/profile/v1", "topo-gate/profile/v2"))
    return path, {}


BROKEN = [_missing, _invalid, _tampered, _foreign, _tp_not_measured, _too_new]


@pytest.mark.parametrize("launcher", list(PLANNERS))
@pytest.mark.parametrize("broken", BROKEN, ids=lambda f: f.__name__.strip("_"))
def test_unusable_profile_forces_nccl(launcher, broken, tmp_path, write_profile) -> None:
    path, overrides = broken(tmp_path, write_profile)
    kwargs = {"tp": 2, "fingerprint": FINGERPRINT, **overrides}
    plan = PLANNERS[launcher](path, **kwargs)
    assert plan.fallback and plan.reason
    assert plan.args == FORCED[launcher].args
    assert dict(plan.env) == dict(FORCED[launcher].env)
    assert dict(plan.config) == dict(FORCED[launcher].config)


@pytest.mark.parametrize("launcher", list(PLANNERS))
def test_launcher_default_opts_out(launcher, tmp_path) -> None:
    plan = PLANNERS[launcher](tmp_path / "absent.yaml", tp=2, fallback="launcher-default")
    assert plan.fallback and "no such file" in plan.reason
    assert (plan.args, dict(plan.env), dict(plan.config)) == ((), {}, {})


@pytest.mark.parametrize("launcher", list(PLANNERS))
def test_same_profile_is_used_on_its_node(launcher, write_profile) -> None:
    # The control for the cases above: the unbroken profile is followed (so a fallback is not vacuous).
    plan = PLANNERS[launcher](write_profile(WINNING), tp=2, fingerprint=FINGERPRINT)
    assert not plan.fallback
    assert (
        plan.args != FORCED[launcher].args
        or dict(plan.env) != dict(FORCED[launcher].env)
        or dict(plan.config) != dict(FORCED[launcher].config)
    )


@pytest.mark.parametrize("launcher", sorted(PLANNERS))
def test_unverified_node_is_nccl_unless_trusted_and_strict_refuses(
    write_profile, monkeypatch, launcher: str
) -> None:
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)
    path = write_profile(WINNING)
    unverified = PLANNERS[launcher](path, tp=2)
    assert unverified.fallback and "node not verified" in unverified.reason
    trusted = PLANNERS[launcher](path, tp=2, trust_unverified_node=True)
    assert not trusted.fallback and any("not verified" in note for note in trusted.notes)
    assert PLANNERS[launcher](path, tp=2, strict=True, trust_unverified_node=True).fallback


def test_nccl_plan_without_profile() -> None:
    plan = nccl_plan("sglang", "no NVIDIA driver")
    assert plan.fallback and plan.reason == "no NVIDIA driver" and plan.args == sglang.FORCE_NCCL.args


def test_bad_fallback_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="fallback must be"):
        PLANNERS["vllm"]("x.yaml", tp=2, fallback="auto")
