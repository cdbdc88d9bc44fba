"""Fault injection for the harness's own tests: make one backend hang, crash or answer wrongly.

Honoured only when the worker's environment has ``TOPO_GATE_ALLOW_FAULT_INJECTION=1``. A spec is a
file that may be stale or hand-edited; requiring a deliberate env setting as well means no spec alone
can make a real probe hang, crash or report a wrong answer. The tests set it.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by __main__ before torch may be: keep this module stdlib at run time
    from topo_gate.trials.backends.base import TrialBuffers

FAULT_INJECTION_ENV = "TOPO_GATE_ALLOW_FAULT_INJECTION"
#: The rank that misbehaves; rank 0 stays healthy so the others are seen waiting on a peer.
FAULTY_RANK = 1
CRASH_EXIT_CODE = 17
#: What the ``transition`` fault costs the first call after a larger size (a stand-in for a Lamport
#: buffer clear). Large against a gloo call on a loaded CPU (a few ms when ranks are descheduled), so
#: the replays after the largest size stand clearly above the steady ones (0.02 s did not, under load).
TRANSITION_S = 0.1
#: What the ``slow`` fault adds to every call: ten times the widest gap seen between two gloo
#: backends' calls on a loaded 2-core machine (a ring at 6 ms a call against gloo at 2 ms), so the
#: slowed backend is the slower one whatever the load (5 ms was not: a test read it faster, once).
SLOW_S = 0.05
#: Per backend, the size of its previous call on this rank (``stale`` and ``transition`` keep state
#: across sizes, as a Lamport workspace does).
_last_tokens: dict[str, int] = {}
#: "hang-late" passes its check, then hangs at this call of the same (backend, size): deep in the
#: measurement, after hundreds of heartbeats, like a kernel that hangs only under graph replay.
LATE_HANG_AT_CALL = 200


def fault_injection_allowed() -> bool:
    return os.environ.get(FAULT_INJECTION_ENV) == "1"


def startup_fails(kind: str | None, out_dir: Path) -> bool:
    """Whether this worker plays a failure outside any backend as a pattern starts: ``infra`` always,
    ``infra-once`` in the runner's first attempt folder only; rank FAULTY_RANK only (read from the
    env rendezvous)."""
    if kind is None or os.environ.get("RANK") != str(FAULTY_RANK):
        return False
    return kind == "infra" or (kind == "infra-once" and out_dir.name == "attempt-1")


def inject(
    kind: str,
    call: Callable[[], None],
    rank: int,
    buffers: TrialBuffers,
    *,
    backend: str = "",
    tokens: int = 0,
) -> Callable[[], None]:
    """``call`` with the fault ``kind`` on FAULTY_RANK; unchanged elsewhere. ``hang``, ``hang-late``
    (passes its check, then hangs at call LATE_HANG_AT_CALL of the same (backend, size)), ``crash``,
    ``wrong`` (every call off by one); ``wrong-odd`` (off by one at token counts that are not powers
    of two: only the checks between the ladder's sizes see it); ``stale`` (off by one on the first call
    after a larger size); ``transition`` (the first call after a larger size is TRANSITION_S slower);
    ``slow`` (every call SLOW_S slower, on every rank: a backend that surely loses)."""
    if kind in ("stale", "transition"):
        return _after_larger(kind, call, rank, buffers, backend, tokens)
    if kind == "slow":
        return _slow(call)
    if rank != FAULTY_RANK:
        return call
    if kind == "hang":
        # Never enters the collective, so the peers wait inside it: a Lamport kernel whose peer
        # never writes looks the same from outside.
        def wait_forever() -> None:
            threading.Event().wait()

        return wait_forever
    if kind == "hang-late":
        calls = itertools.count(1)

        def hang_late() -> None:
            if next(calls) >= LATE_HANG_AT_CALL:
                threading.Event().wait()
            call()

        return hang_late
    if kind == "crash":
        return lambda: os._exit(CRASH_EXIT_CODE)

    def off_by_one() -> None:
        call()
        buffers.out.view(-1)[0] += 1

    if kind == "wrong":
        return off_by_one
    if kind == "wrong-odd":
        return off_by_one if tokens & (tokens - 1) else call
    raise ValueError(f"unknown fault kind {kind!r}")


def _after_larger(
    kind: str, call: Callable[[], None], rank: int, buffers: TrialBuffers, backend: str, tokens: int
) -> Callable[[], None]:
    def stateful() -> None:
        after_larger = _last_tokens.get(backend, 0) > tokens
        _last_tokens[backend] = tokens
        if after_larger and kind == "transition":
            time.sleep(TRANSITION_S)  # every rank: a buffer clear delays the whole collective
        call()
        if after_larger and kind == "stale" and rank == FAULTY_RANK:
            buffers.out.view(-1)[0] += 1

    return stateful


def _slow(call: Callable[[], None]) -> Callable[[], None]:
    def slow() -> None:
        time.sleep(SLOW_S)
        call()

    return slow
