"""Each file in cases/ is a profile ladder and the exact knobs a launcher must get for it (like black's
test data): the comment at the top of each file says why that answer is the safe one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from launcher_profiles import FINGERPRINT, build_profile

from topo_gate.launchers import PLANNERS

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))


@pytest.mark.parametrize("case_file", CASES, ids=[c.stem for c in CASES])
def test_case(case_file: Path) -> None:
    case = yaml.safe_load(case_file.read_text())
    profile = build_profile(
        case["ladders"], tp=case["tp"], sm=case.get("sm", "9.0"), hidden=case.get("hidden", 4096)
    )
    plan = PLANNERS[case["launcher"]](profile, tp=case["tp"], fingerprint=FINGERPRINT)
    assert not plan.fallback, plan.reason
    assert list(plan.args) == case["expect"]["args"]
    assert dict(plan.env) == case["expect"]["env"]
    assert dict(plan.config) == case["expect"]["config"]
    assert plan.notes, "every plan explains its choices"
