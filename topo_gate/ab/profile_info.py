"""The profile an A/B record validates: its path (a profile set's member for this node), digest and
node fingerprint, so ``report`` can put the record next to that very profile."""

from __future__ import annotations

import os
from typing import Any

from topo_gate.profile import ProfileError, load_profile
from topo_gate.profile.profile_set import choose_member, is_profile_set


def profile_info(profile: str | None, fingerprint: str | None) -> dict[str, Any]:
    """``{"path", "digest", "fingerprint"}``; the digest and fingerprint are None when the profile
    cannot be read (only arms without the plan run then), all three when none was given (no plan
    arm: the session measured the user's own env change or NCCL against the default)."""
    if profile is None:
        return {"path": None, "digest": None, "fingerprint": None}
    path = profile
    if is_profile_set(profile):
        chosen = choose_member(profile, fingerprint)
        if chosen.path is None:
            return {"path": profile, "digest": None, "fingerprint": None}
        path = os.fspath(chosen.path)
    try:
        loaded = load_profile(path)
    except ProfileError:
        return {"path": path, "digest": None, "fingerprint": None}
    return {"path": path, "digest": loaded.digest, "fingerprint": loaded.node.fingerprint}
