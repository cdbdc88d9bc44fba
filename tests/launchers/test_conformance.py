"""The conformance run (scripts/conformance.py) reports a bug planted in the route model.

Each case plants one bug by monkeypatching the route model, runs the installed release's own code
through its adapter at a few settings, and asserts that the run agrees there before the plant and
reports disagreements after it. scripts/launcher_parsers.sh runs this file in the parsers venv once
per installed release (vLLM 0.33.0, then 0.34.0 first on the path, then FlashInfer 0.7.4 with
``-k FlashInfer``); a case for another release, or for a launcher not importable here, is skipped
with its reason.

``PLANTED`` is the list of cases: SGLang's adapter adds its own as one more entry.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import base, vllm_compile, vllm_models
from topo_gate.launchers.routes import flashinfer as flashinfer_routes
from topo_gate.launchers.routes import vllm as vllm_routes
from topo_gate.launchers.routes.base import Knobs

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import conformance  # noqa: E402
from conformance_points import Setting  # noqa: E402

# Importing a real launcher sets variables of its own: put the environment back after each test.
pytestmark = [pytest.mark.usefixtures("restore_environment"), pytest.mark.slow]

#: FlashInfer and symm-mem off, so custom all-reduce is the first taker below its cap (8 MiB here).
CUSTOM_FIRST = Knobs(env={"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})
#: Settings where vLLM's custom all-reduce cap is the route's boundary: rows of 8 KiB (the cap falls on
#: one) and of 16 bytes (the custom all-reduce's own alignment), TP 2 over PCIe and TP 8 on NVSwitch.
CUSTOM_CAP_SETTINGS = [
    Setting(
        "vllm", release, capability, tp, group_class, hidden, CUSTOM_FIRST, architecture="LlamaForCausalLM"
    )
    for release in ("0.33.0", "0.34.0")
    for capability, tp, group_class in (((8, 0), 2, "pcie-switch"), ((9, 0), 8, "nvswitch"))
    for hidden in (4096, 8)
]
QWEN3_5 = "Qwen3_5ForCausalLM"
#: Qwen3.5 with the fusion pass off or not compiled: a compiled model would run the plain chain.
QWEN3_5_SETTINGS = [
    Setting("vllm", "0.34.0", (9, 0), 2, "nvswitch", 4096, knobset, architecture=QWEN3_5)
    for knobset in (
        Knobs(args=("--compilation-config", '{"pass_config":{"fuse_allreduce_rms":false}}')),
        Knobs(args=("-O0",)),
        Knobs(args=("--enforce-eager",)),
    )
]


@dataclass(frozen=True)
class Planted:
    """A bug to plant in the route model, where it shows, and whether any message can show it."""

    name: str
    adapter: str
    settings: list[Setting]
    plant: Callable[[pytest.MonkeyPatch], None]
    observable: bool = True
    needs: Callable[[], str | None] = lambda: None  # a reason to skip, None: runnable


def _custom_cap_off_by(delta: int) -> Callable[[pytest.MonkeyPatch], None]:
    """vLLM's custom all-reduce cap ``delta`` bytes off in the route model."""

    def plant(monkeypatch: pytest.MonkeyPatch) -> None:
        real_up_to = base.up_to

        def up_to(limit, backend):
            return real_up_to(limit + delta if backend == "vllm_custom" and limit else limit, backend)

        monkeypatch.setattr(vllm_routes, "up_to", up_to)

    return plant


def _qwen3_5_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Qwen3.5 routed as a compiled model fusing through the pass alone (its 0.34.0 NVIDIA model calls
    the fused kernel itself, uncompiled under breakable CUDA graphs)."""
    fusing_class, breakable = vllm_models.fusing_class, vllm_compile.breakable
    monkeypatch.setattr(
        vllm_models,
        "fusing_class",
        lambda architecture, release: (
            vllm_models.PASS if architecture == QWEN3_5 else fusing_class(architecture, release)
        ),
    )
    monkeypatch.setattr(
        vllm_compile,
        "breakable",
        lambda knobset, ctx: False if ctx.served_architecture == QWEN3_5 else breakable(knobset, ctx),
    )


def _flashinfer_limit_below(monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashInfer's one-shot limit one byte low in the route model."""
    real_limit = flashinfer_routes.oneshot_limit
    monkeypatch.setattr(
        flashinfer_routes,
        "oneshot_limit",
        lambda tp, itemsize, release=None: real_limit(tp, itemsize, release) - 1,
    )


def _flashinfer_alone() -> str | None:
    """The FlashInfer adapter loads FlashInfer's module under the package's own name."""
    if "flashinfer" in sys.modules:
        return "another adapter's FlashInfer stand-in is loaded in this interpreter (run with -k FlashInfer)"
    return None


def _release_modelled(launcher: str, release: str) -> Callable[[], str | None]:
    def needs() -> str | None:
        if release in knobs.SUPPORTED.get(launcher, ()):
            return None
        return f"{launcher} {release} has no route model on this branch yet"

    return needs


PLANTED = [
    Planted("vLLM custom all-reduce cap one byte above", "vllm", CUSTOM_CAP_SETTINGS, _custom_cap_off_by(+1)),
    # One byte below: the cap is a multiple of 16 bytes, the custom all-reduce takes only multiples of 16
    # (inp_size % 16 == 0), and a row of any served model is at least that: the largest message below
    # the cap is 16 bytes under it and the smallest at or above it the cap itself, on both of which
    # the planted and the true cap agree. No message vLLM can receive shows this bug.
    Planted(
        "vLLM custom all-reduce cap one byte below",
        "vllm",
        CUSTOM_CAP_SETTINGS,
        _custom_cap_off_by(-1),
        observable=False,
    ),
    Planted(
        "FlashInfer one-shot limit one byte below",
        "flashinfer",
        [
            Setting("flashinfer", release, (10, 0), tp, "nvswitch", 8, Knobs())
            for release in knobs.LIBRARY_RELEASES["flashinfer"]
            for tp in (2, 4, 8)
        ],
        _flashinfer_limit_below,
        needs=_flashinfer_alone,
    ),
    Planted(
        "Qwen3.5 treated as compiled on vLLM 0.34.0",
        "vllm",
        QWEN3_5_SETTINGS,
        _qwen3_5_compiled,
        needs=_release_modelled("vllm", "0.34.0"),
    ),
]


def _adapter(name: str):
    if not (SCRIPTS / f"conformance_{name}.py").exists():
        pytest.skip(f"scripts/conformance_{name}.py does not exist yet")
    adapter = importlib.import_module(f"conformance_{name}")
    launcher_module = {"vllm": "vllm", "sglang": "sglang", "flashinfer": "flashinfer"}[adapter.LAUNCHER]
    if importlib.util.find_spec(launcher_module) is None:
        pytest.skip(f"{launcher_module} is not installed here")
    return adapter


@pytest.mark.parametrize("case", PLANTED, ids=[case.name for case in PLANTED])
def test_the_run_reports_a_planted_route_model_bug(case: Planted, monkeypatch: pytest.MonkeyPatch) -> None:
    reason = case.needs()
    if reason:
        pytest.skip(reason)
    adapter = _adapter(case.adapter)
    installed = adapter.installed_release()
    settings = [s for s in case.settings if s.release == installed]
    if not settings:
        pytest.skip(f"no setting of this case for the installed {adapter.LAUNCHER} {installed}")
    lines: list[str] = []
    assert conformance.run(adapter, settings, out=lines.append).failed == 0, lines
    case.plant(monkeypatch)
    lines.clear()
    planted = conformance.run(adapter, settings, out=lines.append)
    if case.observable:
        assert planted.failed > 0
        assert all(line.startswith("DISAGREE ") for line in lines), lines
    else:
        assert planted.failed == 0, lines
