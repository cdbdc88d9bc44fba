"""SGLang's custom all-reduce v2 in a CPU (gloo) plan, with real worker processes: recorded unavailable,
with its reason, while the plan's other backends are checked and measured as usual."""

from __future__ import annotations

from pathlib import Path

import pytest
from gloo_helpers import gloo_plan, run_one

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("pattern", "v2", "others"),
    [
        ("allreduce", "custom_v2_sglang", ("gloo", "gloo_ring")),
        ("allreduce_rmsnorm", "custom_v2_sglang+rmsnorm", ("gloo", "gloo_ring", "gloo_ring+rmsnorm")),
    ],
)
def test_a_cpu_plan_records_v2_unavailable_and_measures_the_rest(
    pattern: str, v2: str, others: tuple[str, ...], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bundle that does not exist: admission must refuse for the most basic reason first (no GPU),
    # without reading it.
    monkeypatch.setenv("TOPO_GATE_SGLANG_BUNDLE", str(workdir / "no-such-bundle"))
    plan = gloo_plan(2, pattern, backends=(*others[:1], v2, *others[1:]))
    result = run_one(plan, workdir)
    assert result.error is None and result.attempts == 1
    assert result.backends[v2].status == "unavailable"
    assert result.backends[v2].reason == "needs a CUDA device, the run is on cpu"
    assert not [cell for cell in result.results if cell["backend"] == v2 and cell["status"] != "unavailable"]
    for name in others:
        assert result.backends[name].status == "ok", result.backends[name]
        measured = [cell for cell in result.results if cell["backend"] == name]
        assert [cell["tokens"] for cell in measured] == list(plan.tokens)
        assert all(cell["status"] == "ok" and len(cell["samples_us"]) == plan.rounds for cell in measured)
