"""How every planner reads its profile when the caller says little: the defaults of ``PlanRequest``
as ``read_profile`` and ``plan_from_profile`` take them (a node that is not verified, software that drifted, no fallback named), a
profile set in place of a file, and a command line the launcher itself would refuse.

Each default is the fail-closed one: left unsaid, a planner does not trust a node it cannot verify,
does not refuse a profile over a warning, and changes nothing where it cannot follow the profile.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from priced_profiles import FINGERPRINT, priced_profile, scaled, times

from topo_gate.cli import main
from topo_gate.launchers.plan.choice import Candidate
from topo_gate.launchers.plan.flow import plan_from_profile, read_profile
from topo_gate.launchers.plan.request import LaunchPlanParts, PlanRequest
from topo_gate.launchers.routes import Knobs
from topo_gate.plugins import fallback_mode
from topo_gate.profile import compute_digest, dump_profile, reader
from topo_gate.profile.drift import current_version
from topo_gate.profile.reader import FINGERPRINT_ENV
from topo_gate.profile.yaml_format import to_yaml

NCCL = scaled(8.0, 0.01)
TABLES = {
    "allreduce": {"nccl": NCCL, "trtllm_oneshot": times(NCCL, 0.5)},
    "allreduce_rmsnorm": {"nccl": times(NCCL, 1.2), "trtllm_fused_oneshot": times(NCCL, 0.6)},
}
FORCED = LaunchPlanParts(args=("--forced",), env={}, notes=("forced",))
UNVERIFIED = "node not verified against the profile's fingerprint"
OTHER_NODE = "sha256:" + "cd" * 32


@pytest.fixture(autouse=True)
def no_fingerprint_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FINGERPRINT_ENV, raising=False)


def nothing_offered(facts, tp, user):
    return [Candidate(Knobs(), ("as it is",))]


def follow(profile, **options):
    """A vLLM plan for TP 2, NCCL forced on a fallback, for this node unless a test says otherwise."""
    request = PlanRequest(profile, tp=2, **{"fallback": "nccl", "fingerprint": FINGERPRINT, **options})
    return plan_from_profile("vllm", FORCED, nothing_offered, request)


def drifted_profile():
    """The priced profile as if measured under another torch than this environment's."""
    assert current_version("torch") is not None, "the tests run with torch installed"
    profile = priced_profile(TABLES)
    node = dataclasses.replace(profile.node, software={"torch": "1.0.0"})
    return dataclasses.replace(profile, node=node).with_digest()


# -- defaults -------------------------------------------------------------------------------------------


def test_by_default_a_node_that_cannot_be_verified_is_a_fallback() -> None:
    facts = read_profile(PlanRequest(priced_profile(TABLES), tp=2))
    assert facts.fallback_reason is not None and facts.fallback_reason.startswith(f"allreduce: {UNVERIFIED}")
    plan = follow(priced_profile(TABLES), fingerprint=None)
    assert plan.fallback is True and plan.reason.startswith(f"allreduce: {UNVERIFIED}")
    assert plan.args == ("--forced",)


def test_trusting_an_unverified_node_is_asked_for_and_then_warned_about() -> None:
    facts = read_profile(PlanRequest(priced_profile(TABLES), tp=2, trust_unverified_node=True))
    assert facts.fallback_reason is None and facts.warnings[0].startswith(UNVERIFIED)


def test_by_default_drifted_software_is_a_warning_and_strict_makes_it_a_fallback() -> None:
    drift = f"software changed since the profile was measured: torch 1.0.0 -> {current_version('torch')}"
    facts = read_profile(PlanRequest(drifted_profile(), tp=2, fingerprint=FINGERPRINT))
    assert facts.fallback_reason is None and drift in facts.warnings
    strict = read_profile(PlanRequest(drifted_profile(), tp=2, fingerprint=FINGERPRINT, strict=True))
    assert strict.fallback_reason == f"allreduce: strict: {drift}"  # the first pattern read


def test_with_no_fallback_named_a_plan_that_cannot_follow_its_profile_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # recommend and the plugins (TOPO_GATE_FALLBACK unset) both default to the launcher's own defaults.
    assert fallback_mode({}) == ("launcher-default", None)
    code = main(["recommend", str(tmp_path / "absent.yaml"), "--tp", "2", "--launcher", "vllm"])
    out, err = capsys.readouterr()
    assert code == 0 and out == "\n"
    assert "FALLBACK (launcher-default)" in err


# -- read once --------------------------------------------------------------------------------------------


def _counting(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, calls: dict[str, int]) -> None:
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[name] = calls.get(name, 0) + 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def test_a_plan_verifies_a_loaded_profile_once_for_both_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = priced_profile(TABLES)
    calls: dict[str, int] = {}
    for name in ("compute_digest", "check_semantics"):
        _counting(monkeypatch, reader, name, calls)
    plan = follow(profile)
    assert not plan.fallback, plan.reason
    assert calls == {"compute_digest": 1, "check_semantics": 1}


def test_a_plan_loads_a_profile_file_once_for_both_patterns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "node.yaml"
    dump_profile(priced_profile(TABLES), path)
    calls: dict[str, int] = {}
    _counting(monkeypatch, reader._CACHE, "load", calls)
    plan = follow(path)
    assert not plan.fallback, plan.reason
    assert calls == {"load": 1}


def test_a_newer_minor_with_fields_this_reader_does_not_know_is_planned_from(tmp_path: Path) -> None:
    # The file's digest covers the unknown fields, which the loaded Profile drops: the planner reads the
    # file as gate() does, once, and never re-seals the loaded object against the file's digest.
    data = priced_profile(TABLES).to_dict()
    del data["digest"]
    data["schema"] = "topo-gate/profile/v1.9"
    data["added_in_v1_9"] = [1, 2, 3]
    path = tmp_path / "v1.9.yaml"
    path.write_text(to_yaml({**data, "digest": compute_digest(data)}), encoding="utf-8")
    plan = follow(path)
    assert not plan.fallback, plan.reason


# -- a profile set in place of a file ---------------------------------------------------------------------


@pytest.fixture
def profile_set(tmp_path: Path) -> Path:
    """A set of two members: this node's profile (FINGERPRINT) and another node's."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    here = priced_profile(TABLES)
    dump_profile(here, folder / "here.yaml")
    other = dataclasses.replace(here, node=dataclasses.replace(here.node, fingerprint=OTHER_NODE))
    dump_profile(other.with_digest(), folder / "other.yaml")
    return folder


@pytest.mark.parametrize("given", ["argument", "env"])
def test_a_profile_set_gives_the_member_made_for_this_node(
    profile_set: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    if given == "env":
        monkeypatch.setenv(FINGERPRINT_ENV, FINGERPRINT)
    fingerprint = FINGERPRINT if given == "argument" else None
    facts = read_profile(PlanRequest(str(profile_set), tp=2, fingerprint=fingerprint))
    assert facts.fallback_reason is None
    assert facts.warnings[0] == f"using profile set {profile_set}: here.yaml"
    assert sorted(facts.tables) == ["allreduce", "allreduce_rmsnorm"]


def test_a_profile_set_without_this_nodes_member_is_a_fallback_that_says_so(profile_set: Path) -> None:
    (profile_set / "here.yaml").unlink()
    facts = read_profile(PlanRequest(profile_set, tp=2, fingerprint=FINGERPRINT))
    assert facts.fallback_reason is not None and facts.fallback_reason.startswith(
        f"profile set {profile_set}"
    )
    assert facts.tables == {}


# -- the user's command line -------------------------------------------------------------------------------


def test_a_command_line_the_launcher_would_refuse_is_a_fallback_naming_it() -> None:
    plan = follow(priced_profile(TABLES), user_args=("--max-num-seqs",))
    assert plan.fallback is True and plan.args == ("--forced",)
    assert plan.reason.startswith("your command line cannot be read as vllm reads it: ")
    assert "--max-num-seqs" in plan.reason


def test_a_plans_repr_is_what_it_changes_not_the_pricing_behind_it() -> None:
    # The priced candidates (every rejected knob set, per size) are for `recommend --explain`; a plan
    # shown in a log or a REPL stays the launcher, its changes and the reason.
    plan = follow(priced_profile(TABLES))
    assert plan.choice is not None and plan.workload is not None
    shown = repr(plan)
    assert "choice=" not in shown and "workload=" not in shown
    assert shown.startswith("LaunchPlan(launcher='vllm', ") and "reason='following the profile'" in shown
