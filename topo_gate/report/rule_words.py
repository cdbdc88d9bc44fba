"""How one rule reads wherever a profile is shown (probe's summary, ``show``, ``report.html``,
``summary.md``, the figures): its backend, whether a speed-up is shown, its reason in one line.

A CPU-harness profile is measured against gloo, not NCCL: its gloo rule is the baseline, not a winner
at 1.00x, and its ``nccl`` rules (above the sizes measured, a TP size skipped) name a backend that
machine does not have -- there nothing was measured. Pure text: no rich, no matplotlib.
"""

from __future__ import annotations

from topo_gate.evidence.names import BASELINE_BACKEND
from topo_gate.profile.schema import NCCL, Rule

CPU_BASELINE = BASELINE_BACKEND["cpu"]
NOT_MEASURED = "not measured"


def backend_words(backend: str, *, cpu: bool) -> str:
    """``gloo (baseline)`` and ``not measured`` in a CPU-harness profile; the backend's name otherwise."""
    if cpu and backend == NCCL:
        return NOT_MEASURED
    if cpu and backend == CPU_BASELINE:
        return f"{CPU_BASELINE} (baseline)"
    return backend


def shows_speedup(rule: Rule, *, cpu: bool) -> bool:
    """A speed-up to print: never the baseline's over itself (gloo's 1.00x on the CPU harness)."""
    return rule.speedup is not None and not (cpu and rule.backend == CPU_BASELINE)


def is_fast_path(backend: str) -> bool:
    """A rule that opts into a backend other than the baseline (NCCL, or gloo on the CPU harness)."""
    return backend not in (NCCL, CPU_BASELINE)


def reason_parts(reason: str | None) -> tuple[str, str]:
    """The reason's first clause -- what decided the range (``fusion off: pcie_ipc + norm is faster
    at ...``, ``pcie_ipc beat nccl by >= 5% ...``) -- and the rest: the detail, size by size."""
    headline, _, detail = (reason or "").partition("; ")
    return headline, detail


def one_line_reason(reason: str | None) -> str:
    return reason_parts(reason)[0]
