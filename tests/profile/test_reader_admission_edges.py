"""admit()'s edges (``profile/reader.py``): which provenance makes a plan carry the SYNTHETIC warning,
and that an admission missing any one of its profile, TP size or group class answers its reason.

Only ``synthetic: true`` is synthetic: ``show`` and the report label a profile SYNTHETIC on exactly that
test (``report/tables.py``, ``report/sources.py``), so the warning a plan carries and the label on the
screen never disagree about one file. A truthy non-boolean (``1``, ``"yes"``) is neither.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo_gate.profile import admit
from topo_gate.profile.reader import SYNTHETIC_PROFILE


@pytest.mark.parametrize(
    ("synthetic", "warned"),
    [(True, True), (False, False), (None, False), (1, False), ("yes", False), ("absent", False)],
    ids=["true", "false", "null", "one", "yes", "absent"],
)
def test_only_a_synthetic_true_profile_warns_that_it_is_synthetic(
    example_data: dict[str, Any], write_profile: Callable[..., Path], synthetic: object, warned: bool
) -> None:
    provenance = example_data["node"]["provenance"]
    if synthetic == "absent":
        del provenance["synthetic"]
    else:
        provenance["synthetic"] = synthetic
    admission = admit(write_profile(example_data), tp=2, fingerprint=example_data["node"]["fingerprint"])
    assert admission.profile is not None, admission.reason
    assert (SYNTHETIC_PROFILE in admission.warnings) is warned


@pytest.mark.parametrize("missing", ["profile", "tp", "group_class"])
def test_an_admission_without_any_one_of_its_three_facts_answers_its_reason(
    example_path: Path, example_data: dict[str, Any], missing: str
) -> None:
    admitted = admit(example_path, tp=2, fingerprint=example_data["node"]["fingerprint"])
    assert admitted.profile is not None
    cleared: dict[str, Any] = {missing: None}
    refused = dataclasses.replace(admitted, reason="refused here", **cleared)
    decision = refused.decide("allreduce", 1024)
    assert (decision.backend, decision.fallback, decision.reason) == ("nccl", True, "refused here")
