"""Which of a run's trial backends this machine is known, before any trial, not to be able to run.

Asked without importing torch, FlashInfer or SGLang (each takes seconds, and SGLang's package
imports its whole server): ``importlib.util.find_spec`` on top-level packages, and the SGLang
kernels' own up-front check (``custom_v2_bundle.kernels_missing``). A backend not named here may
still be refused by a worker's admission (SM, P2P, TP size): the preflight says "timed" only for
what this run will try, and the evidence says what it measured.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping, Sequence

from topo_gate.probe.jit import FLASHINFER_PREFIXES, SGLANG_V2, jit_refusals
from topo_gate.trials.backends._flashinfer import flashinfer_missing
from topo_gate.trials.backends.custom_v2_bundle import kernels_missing
from topo_gate.trials.backends.names import COMPOSITE_SUFFIX


def unavailable_up_front(
    names: Iterable[str], device: str, environ: Mapping[str, str] = os.environ, sms: Sequence[str] = ()
) -> dict[str, str]:
    """Per backend of ``names`` known not to run on this machine, why: not installed, or a JIT build
    it needs that cannot run here (``jit.jit_refusals``, asked for the GPUs' ``sms``); the CPU
    harness's gloo backends always run."""
    if device != "cuda":
        return {}
    names = list(names)
    plains = {name: name.removesuffix(COMPOSITE_SUFFIX) for name in names}
    torch = None if _importable("torch") else "torch is not installed"
    flashinfer = flashinfer_missing()
    sglang = kernels_missing(environ) if SGLANG_V2 in plains.values() else None
    reasons = {}
    for name, plain in plains.items():
        if torch is not None:
            reasons[name] = torch
        elif plain == SGLANG_V2 and sglang is not None:
            reasons[name] = f"SGLang 0.5.23's kernels are not importable here ({_first_clause(sglang)})"
        elif plain.startswith(FLASHINFER_PREFIXES) and flashinfer is not None:
            reasons[name] = flashinfer
    if torch is None:
        plain_refusals = jit_refusals([plains[name] for name in names if name not in reasons], sms, environ)
        reasons |= {name: plain_refusals[plains[name]] for name in names if plains[name] in plain_refusals}
    return reasons


def _first_clause(reason: str) -> str:
    """ "sglang not installed (pip install ...)" -> "sglang not installed": the preflight says the fix."""
    return reason.split(" (", 1)[0]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
