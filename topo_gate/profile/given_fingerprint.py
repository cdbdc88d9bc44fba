"""A node fingerprint given rather than read (``TOPO_GATE_NODE_FINGERPRINT``, ``--node-fingerprint``,
``fingerprint=``), as every reader of it takes it, and where two fingerprints differ.

A value from a ConfigMap or a ``.env`` file often ends in a blank or a CR that nobody sees; a
fingerprint (``sha256:`` and hex digits) holds none, so blanks around it are dropped, and a value that
is blank altogether counts as unset. Two fingerprints that still differ are named with where: the
first differing character, or which one has more characters -- a reason that shows two equal-looking
prefixes only hides the difference.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

FINGERPRINT_ENV = "TOPO_GATE_NODE_FINGERPRINT"


def given_text(value: str | None) -> str | None:
    """``value`` without blanks around it; None when nothing is left (an empty value is unset)."""
    if value is None:
        return None
    return value.strip() or None


def env_fingerprint(environ: Mapping[str, str] = os.environ) -> str | None:
    """``TOPO_GATE_NODE_FINGERPRINT`` as given (``given_text``): None when unset or blank."""
    return given_text(environ.get(FINGERPRINT_ENV))


def difference(here: str, there: str) -> str:
    """Where ``here`` (this node's) and ``there`` (the profile's) part, in words; they must differ."""
    for index, (mine, theirs) in enumerate(
        zip(here, there, strict=False)
    ):  # the longer one's tail is worded below
        if mine != theirs:
            return f"they differ at character {index + 1}: {mine!r} here, {theirs!r} in the profile"
    shorter, longer, whose = (
        (there, here, "this node's") if len(here) > len(there) else (here, there, "the profile's")
    )
    extra = longer[len(shorter) :]
    return f"{whose} has {len(extra)} more character(s) after the first {len(shorter)}: {extra[:8]!r}"
