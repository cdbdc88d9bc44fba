"""``pip install ".[trials]"`` installs the FlashInfer release the route models read, not whatever is
newest: a probe on a newer FlashInfer times kernels whose one-/two-shot rule no route model follows."""

from __future__ import annotations

from pathlib import Path

import tomllib

from topo_gate.launchers.knobs import LIBRARY_RELEASES

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_trials_extra_pins_a_modelled_flashinfer_release() -> None:
    extra = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]["trials"]
    (flashinfer,) = [item for item in extra if item.startswith("flashinfer-python")]
    name, pinned, version = flashinfer.partition("==")
    assert (name, pinned) == ("flashinfer-python", "==") and version in LIBRARY_RELEASES["flashinfer"]
