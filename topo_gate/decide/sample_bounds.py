"""The per-call samples ``decide`` judges, held to the price table's physical bounds first.

A sample no probe could time (above the step timeout, or an all-reduce call faster than any kernel)
would be judged into a speed-up of 1e297x, which no figure can be written as (``decide`` stopped
with an internal error on one). ``decide`` refuses such evidence before judging it, naming the first
sample, with the words and bounds the loader holds a profile's prices to
(``profile.measurements.MIN_CALL_US`` / ``MAX_CALL_US``, docs/profile.md "Bounds on the numbers").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from topo_gate._units import us_text
from topo_gate.evidence.document import Run
from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.measurements import MAX_CALL_US, MIN_CALL_US


def check_sample_bounds(runs: Sequence[Run]) -> None:
    """``ProfileInvalid`` naming the first sample outside its bounds: an all-reduce call's (a
    result's samples and its replays after a larger size) in ``[MIN_CALL_US, MAX_CALL_US]``, a layer
    graph's (``context``, the GEMM alone included) at most ``MAX_CALL_US``."""
    for where, samples, floor in _series(runs):
        for index, sample in enumerate(samples):
            if sample > MAX_CALL_US:
                raise ProfileInvalid(
                    f"{sample!r} us is longer than a probe can time (at most {us_text(MAX_CALL_US, 0)} us: the step timeout)",
                    f"{where}[{index}]",
                )
            if sample < floor:
                raise ProfileInvalid(
                    f"{sample!r} us is faster than any all-reduce kernel (at least {MIN_CALL_US} us a call)",
                    f"{where}[{index}]",
                )


def _series(runs: Sequence[Run]) -> Iterator[tuple[str, Sequence[float], float]]:
    for r, run in enumerate(runs):
        for c, result in enumerate(run.results):
            at = f"runs[{r}].results[{c}]"
            yield f"{at}.samples_us", result.samples_us, MIN_CALL_US
            yield f"{at}.after_larger_us", result.after_larger_us, MIN_CALL_US
            for a, after in enumerate(result.after_sizes):
                yield f"{at}.after_sizes[{a}].samples_us", after.samples_us, MIN_CALL_US
        for e, entry in enumerate(run.context):
            yield f"runs[{r}].context[{e}].samples_us", entry.samples_us, 0.0
