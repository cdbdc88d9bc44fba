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
