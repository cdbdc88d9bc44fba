"""The plugins' log line names the profile the plan followed: for a profile set, the member chosen
for the node (it used to say "profile unreadable" while the plan followed a member)."""

from __future__ import annotations

import shutil
from pathlib import Path

from topo_gate.plugins import profile_digest
from topo_gate.profile import load_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
MEMBERS = (PROFILES / "h200-x2" / "h7168-run1.yaml", PROFILES / "examples" / "synthetic-h200x2.yaml")


def test_a_profile_sets_member_is_named_with_its_digest(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    for source in MEMBERS:
        shutil.copy(source, folder / f"{source.parent.name}.yaml")
    member = load_profile(MEMBERS[0])
    line = profile_digest(str(folder), member.node.fingerprint)
    assert line == f"{member.digest} (member h200-x2.yaml of the set)"
    assert "unreadable" not in profile_digest(str(folder), None)
    assert profile_digest(str(folder), None).startswith("no member of the set (")


def test_a_single_profile_and_a_missing_one() -> None:
    assert profile_digest(str(MEMBERS[0])) == load_profile(MEMBERS[0]).digest
    assert profile_digest("/no/such/profile.yaml") == "unreadable (ProfileUnreadable)"
