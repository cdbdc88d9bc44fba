"""``validate DIR``: is a profile set usable as a whole? Every member valid, one member per fingerprint.

The reader answers NCCL when two members claim this node's fingerprint, so a set with such a pair is
broken for every node of that class, even when the two agree. The check tells the two cases apart
because their fixes differ: a *duplicate* (the same backend at the same size ranges, whatever
the measured numbers: delete one) and a *conflict* (different choices for one node class: merge the
evidence with ``fleet merge``, or keep one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from topo_gate.profile.digest import canonical_json
from topo_gate.profile.errors import ProfileError
from topo_gate.profile.io import load_profile
from topo_gate.profile.profile_set import member_names
from topo_gate.profile.schema import Profile


@dataclass(frozen=True)
class Member:
    """One file of the set: its fingerprint when it loaded, else the loader's one-line problem."""

    name: str
    fingerprint: str | None
    problem: str | None = None
    decisions: int = 0


@dataclass(frozen=True)
class SetReport:
    """The members, and every set-level problem (duplicates, conflicts, invalid members, none at all)."""

    directory: str
    members: tuple[Member, ...]
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        return {
            "directory": self.directory,
            "ok": self.ok,
            "members": [
                {"name": m.name, "fingerprint": m.fingerprint, "decisions": m.decisions, "problem": m.problem}
                for m in self.members
            ],
            "problems": list(self.problems),
        }


def check_set(directory: str | os.PathLike[str]) -> SetReport:
    """Load every member in full (schema and digest) and check one member per fingerprint.

    Raises ``OSError`` when the directory itself cannot be listed.
    """
    folder = os.fsdecode(directory)
    members: list[Member] = []
    loaded: dict[str, list[tuple[str, Profile]]] = {}
    problems: list[str] = []
    for name in member_names(folder):
        try:
            profile = load_profile(os.path.join(folder, name))
        except ProfileError as error:
            members.append(Member(name, None, str(error)))
            problems.append(f"{name}: invalid: {error}")
            continue
        members.append(Member(name, profile.node.fingerprint, decisions=len(profile.decisions)))
        loaded.setdefault(profile.node.fingerprint, []).append((name, profile))
    if not members:
        problems.append("no profiles (*.yaml, *.yml) in the set")
    for fingerprint, claimants in sorted(loaded.items()):
        problems.extend(_one_per_fingerprint(fingerprint, claimants))
    return SetReport(folder, tuple(members), tuple(problems))


def _one_per_fingerprint(fingerprint: str, claimants: list[tuple[str, Profile]]) -> list[str]:
    if len(claimants) < 2:
        return []
    names = ", ".join(name for name, _ in claimants)
    contents = {_decided(profile) for _, profile in claimants}
    if len(contents) == 1:
        return [
            f"duplicate: {names} choose the same backends at the same sizes for fingerprint "
            f"{fingerprint[:19]}...; keep one (the reader answers NCCL when several members match a node)"
        ]
    return [
        f"conflict: {names} decide differently for fingerprint {fingerprint[:19]}...; keep one, or "
        "merge their evidence with `topo-gate fleet merge` (the reader answers NCCL for this node class)"
    ]


def _decided(profile: Profile) -> str:
    """What a member chooses, as comparable text: per (TP, pattern, group class) its backend ladder
    and the TP sizes it skipped; the measured numbers and reasons may differ between two runs."""
    ladders = sorted([*d.key, [[r.max_bytes, r.backend] for r in d.rules]] for d in profile.decisions)
    return canonical_json({"ladders": ladders, "skipped": sorted(s.tp for s in profile.skipped)})
