"""Every span hash recorded for a wheel-backed release is what that release's wheel holds.

Needs the wheels, which are large and not in the repository: TOPO_GATE_LAUNCHER_SOURCES names a folder
holding ``<package>-<release>-*.whl`` of every release with a wheel-backed span file (vLLM, SGLang,
FlashInfer; scripts/launcher_parsers.sh downloads them). Skipped otherwise. TensorRT-LLM's and torch's
spans are pinned to git commits CI cannot fetch: scripts/release_watch.py is where those are re-read.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cited_spans.py"
DATA = SCRIPT.parents[1] / "topo_gate" / "launchers" / "data"
SOURCES = os.environ.get("TOPO_GATE_LAUNCHER_SOURCES")
pytestmark = pytest.mark.skipif(not SOURCES, reason="TOPO_GATE_LAUNCHER_SOURCES not set")

_spec = importlib.util.spec_from_file_location("cited_spans", SCRIPT)
assert _spec is not None and _spec.loader is not None
cited_spans = importlib.util.module_from_spec(_spec)
sys.modules["cited_spans"] = cited_spans
_spec.loader.exec_module(cited_spans)

#: The wheel's distribution name, where it is not the launcher's.
DISTRIBUTIONS = {"flashinfer": "flashinfer_python"}
WHEEL_BACKED = sorted(
    path.name
    for path in DATA.glob("spans-*.json")
    if json.loads(path.read_text(encoding="utf-8"))["source"]["kind"] == "wheel"
)


@pytest.mark.parametrize("name", WHEEL_BACKED)
def test_every_cited_span_is_what_the_wheel_holds(name: str) -> None:
    recorded = json.loads((DATA / name).read_text(encoding="utf-8"))
    launcher, release = recorded["launcher"], recorded["version"]
    distribution = DISTRIBUTIONS.get(launcher, launcher)
    wheels = sorted(Path(SOURCES or "").glob(f"{distribution}-{release}-*.whl"))
    assert len(wheels) == 1, f"expected one {distribution}-{release}-*.whl under {SOURCES}, found {wheels}"
    changed = cited_spans.check(recorded["spans"], cited_spans.wheel_files(wheels[0]))
    assert not changed, "\n".join(
        f"{launcher} {release}: the span {item.key} changed ({item.why}). Re-read {item.key} in "
        f"{wheels[0].name}; update the route model (or plugin docstring) that cites it, then its hash: "
        f"python scripts/cited_spans.py hash {launcher} {release} --wheel {wheels[0].name}"
        for item in changed
    )


#: The eight spans of vLLM 0.33.0's route model (as first written) whose text 0.34.0 changed.
CHANGED_IN_0_34_0 = {
    "vllm/config/vllm.py:179-203,256-323",
    "vllm/distributed/device_communicators/cuda_communicator.py:56-166",
    "vllm/distributed/device_communicators/custom_all_reduce.py:117-118,134-149,186-289,496-511",
    "vllm/distributed/device_communicators/flashinfer_all_reduce.py:142-177",
    "vllm/distributed/device_communicators/flashinfer_all_reduce.py:393-519",
    "vllm/distributed/device_communicators/flashinfer_all_reduce.py:72-120,180-246",
    "vllm/models/common/ops/fused_allreduce_rms_norm.py:23-63",
    "vllm/models/minimax_m3/nvidia/model.py:764-790",
}


def test_the_0_33_0_citations_fail_on_the_0_34_0_wheel() -> None:
    """Retargeting by changing the release string alone would not pass: each span whose text changed
    fails (and so does each span that only moved, whose lines the citation must follow)."""
    wheels = sorted(Path(SOURCES or "").glob("vllm-0.34.0-*.whl"))
    assert len(wheels) == 1, f"expected one vllm-0.34.0-*.whl under {SOURCES}"
    recorded = json.loads((DATA / "spans-vllm-0.33.0.json").read_text(encoding="utf-8"))["spans"]
    failed = {item.key for item in cited_spans.check(recorded, cited_spans.wheel_files(wheels[0]))}
    assert CHANGED_IN_0_34_0 <= failed
