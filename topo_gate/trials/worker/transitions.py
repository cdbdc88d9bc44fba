"""Size transitions of Lamport-style backends: what one replay costs right after larger messages.

A Lamport kernel's first calls after a larger message clear that message's buffer slots, so a decode
step after a prefill chunk pays for the chunk. How much depends on the larger size, and a launcher
route that sends large messages elsewhere (NCCL) never leaves them in the buffer: a planner charges
a route the transition after the largest size *that route* sends to the backend. So per backend
and size ``s``, TRANSITION_REPS replays of ``s``'s graph are timed right after PREDECESSOR_CALLS calls
of each larger size ``L`` of:

- the backend's own largest timed size, at every smaller timed size (``after_larger_us``, which
  decide's rule 5 charges);
- every other size of the plan's ``after_tokens`` (every AFTER_STEP-th size down from the largest,
  ``plan.py`` says why), for the pairs a plan may route: ``s`` and ``L`` where the backend cleared
  the isolated bar (``context.cleared``: charged as decide charges) or is a launcher default path.

Recorded per cell as ``after``, ascending by ``L`` (evidence ``after_sizes``).
"""

from __future__ import annotations

from typing import Any

from topo_gate.trials.worker import context
from topo_gate.trials.worker.state import RankPattern

PREDECESSOR_CALLS = 4  # a prefill chunk's few calls before decode
TRANSITION_REPS = 3
#: Faults that make a gloo backend behave like a Lamport one (the harness's tests).
_TRANSITION_FAULTS = ("stale", "transition")


def time_transitions(trials: RankPattern) -> None:
    """The replays after larger sizes (module docstring); also leaves ``trials.predecessors``, the
    largest size's graph of every backend, for the rechecks."""
    for name in trials.backends:
        sizes = trials.timed_sizes(name)
        if sizes:
            trials.predecessors[name] = _predecessor(trials, name, sizes[-1])
    sensitive = [
        name
        for name, backend in trials.backends.items()
        if (backend.lamport or trials.plan.faults.get(name) in _TRANSITION_FAULTS)
        and len(trials.timed_sizes(name)) > 1
    ]
    for name in sensitive:
        sizes = trials.timed_sizes(name)
        for tokens in sizes[:-1]:
            _replays(trials, name, tokens, sizes[-1], trials.predecessors[name])
    cleared = context.cleared(trials, trials.group_medians(charge=True)) if sensitive else {}
    for name in sensitive:
        sizes = trials.timed_sizes(name)

        def routable(tokens: int, name: str = name) -> bool:
            return trials.is_default_path(name) or name in cleared.get(tokens, ())

        for larger in [t for t in trials.plan.after_tokens or () if t in sizes[:-1] and routable(t)]:
            smaller = [t for t in sizes if t < larger and routable(t)]
            if smaller:
                predecessor = _predecessor(trials, name, larger)
                for tokens in smaller:
                    _replays(trials, name, tokens, larger, predecessor)
    for cell in trials.cells:
        cell.after.sort(key=lambda entry: entry["tokens"])


def _predecessor(trials: RankPattern, name: str, tokens: int) -> Any:
    trials.beat("prepare", name, tokens)
    return trials.timer.prepare(
        trials.passed[(name, tokens)],
        after_capture=trials.backends[name].after_capture,
        calls=PREDECESSOR_CALLS,
    )


def _replays(trials: RankPattern, name: str, tokens: int, larger: int, predecessor: Any) -> None:
    samples = []
    for rep in range(TRANSITION_REPS):
        trials.beat("transition", name, tokens, rep)
        samples.append(
            trials.timer.measure(trials.measurables[(name, tokens)], preroll=predecessor).per_call_us
        )
    trials.cell(name, tokens).after.append({"tokens": larger, "per_call_us": samples})
