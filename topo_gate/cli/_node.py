"""Which node a command plans for when the node is not read: one rule for ``recommend``, ``exec`` and ``ab``.

The fingerprint is ``--node-fingerprint``, else -- unless ``--from CAPTURE`` names a node to read --
the env ``TOPO_GATE_NODE_FINGERPRINT`` (set by ``topo-gate exec`` for what it starts, or by whatever
checked the node before: an init container, a job script), else nothing: ``exec`` and ``ab`` then read
the node (NVML or the capture), and ``recommend``, which reads no node, plans for the profile's node
class unverified (the reader applies the same env rule there). Blanks around a value are dropped and
a blank value counts as unset, as in the reader and the plugins.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from topo_gate.profile.given_fingerprint import FINGERPRINT_ENV, env_fingerprint, given_text


def given_fingerprint(
    option: str | None, from_capture: str | None, environ: Mapping[str, str] = os.environ
) -> tuple[str, str] | None:
    """``(fingerprint, where it came from)`` when the node was given rather than to be read; blanks
    around a value are dropped, and a blank one is not given (``profile.given_fingerprint``)."""
    from_option = given_text(option)
    if from_option is not None:
        return from_option, "--node-fingerprint"
    from_env = env_fingerprint(environ)
    if from_capture is None and from_env:
        return from_env, FINGERPRINT_ENV
    return None
