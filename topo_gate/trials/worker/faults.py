"""Fault injection for the harness's own tests: make one backend hang, crash or answer wrongly.

Honoured only when the worker's environment has ``TOPO_GATE_ALLOW_FAULT_INJECTION=1``. A spec is a
file that may be stale or hand-edited; requiring a deliberate env setting as well means no spec alone
can make a real probe hang, crash or report a wrong answer. The tests set it.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by __main__ before torch may be: keep this module stdlib at run time
    from topo_gate.trials.backends.base import TrialBuffers

FAULT_INJECTION_ENV = "TOPO_GATE_ALLOW_FAULT_INJECTION"
#: The rank that misbehaves; rank 0 stays healthy so the others are seen waiting on a peer.
FAULTY_RANK = 1
CRASH_EXIT_CODE = 17
#: "hang-late" passes its check, then hangs at this call of the same (backend, size): deep in the
#: measurement, after hundreds of heartbeats, like a kernel that hangs only under graph replay.
LATE_HANG_AT_CALL = 200


def fault_injection_allowed() -> bool:
    return os.environ.get(FAULT_INJECTION_ENV) == "1"


def inject(kind: str, call: Callable[[], None], rank: int, buffers: TrialBuffers) -> Callable[[], None]:
    """``call`` with the fault ``kind`` ("hang" | "hang-late" | "crash" | "wrong") on FAULTY_RANK;
    unchanged elsewhere."""
    if rank != FAULTY_RANK:
        return call
    if kind == "hang":
        # Never enters the collective, so the peers wait inside it: a Lamport kernel whose peer
        # never writes looks the same from outside.
        return lambda: threading.Event().wait()
    if kind == "hang-late":
        calls = itertools.count(1)

        def hang_late() -> None:
            if next(calls) >= LATE_HANG_AT_CALL:
                threading.Event().wait()
            call()

        return hang_late
    if kind == "crash":
        return lambda: os._exit(CRASH_EXIT_CODE)
    if kind == "wrong":

        def off_by_one() -> None:
            call()
            buffers.out.view(-1)[0] += 1

        return off_by_one
    raise ValueError(f"unknown fault kind {kind!r}")
