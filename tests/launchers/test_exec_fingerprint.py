"""``exec`` hands the launcher the fingerprint it verified on this node: one left in the user's
environment by an earlier launch or another node's job script never reaches the child in its place,
and never stands for the node where ``--from CAPTURE`` names the node to read."""

from __future__ import annotations

import pytest

from topo_gate.cli._node import given_fingerprint
from topo_gate.launchers import plan_without_profile
from topo_gate.launchers.exec import prepare, read_for
from topo_gate.profile.reader import FINGERPRINT_ENV

VERIFIED = "sha256:" + "ab" * 32
STALE = "sha256:" + "cd" * 32
CMD = ("vllm", "serve", "m", "--tensor-parallel-size", "2")


@pytest.mark.parametrize("launcher", ["sglang", "vllm", "trtllm"])
def test_the_verified_fingerprint_replaces_a_stale_one_in_the_childs_env(launcher: str) -> None:
    plan = plan_without_profile(launcher, "a test plan", fallback="launcher-default")
    user_env = {FINGERPRINT_ENV: STALE, "PATH": "/bin"}
    merged = prepare(read_for(plan, CMD), plan, user_env, verified_fingerprint=VERIFIED)
    assert merged.env[FINGERPRINT_ENV] == VERIFIED
    assert merged.env["PATH"] == "/bin"
    assert not any(STALE in warning for warning in merged.warnings)


def test_without_a_verified_node_the_stale_fingerprint_is_not_passed_on() -> None:
    # The node could not be checked (no driver): the child must not read the stale value as checked.
    plan = plan_without_profile("vllm", "node not checked", fallback="launcher-default")
    merged = prepare(read_for(plan, CMD), plan, {FINGERPRINT_ENV: STALE}, verified_fingerprint=None)
    assert FINGERPRINT_ENV not in merged.env


def test_a_capture_to_read_is_the_node_whatever_the_environment_says() -> None:
    assert given_fingerprint(None, "node.capture.json", {FINGERPRINT_ENV: STALE}) is None
    assert given_fingerprint(None, None, {FINGERPRINT_ENV: STALE}) == (STALE, FINGERPRINT_ENV)
    assert given_fingerprint(VERIFIED, None, {FINGERPRINT_ENV: STALE}) == (VERIFIED, "--node-fingerprint")
