"""The per-call samples ``decide`` judges, held to the price table's physical bounds first.

A sample no probe could time (above the step timeout, or an all-reduce call faster than any kernel)
would be judged into a speed-up of 1e297x, which no figure can be written as (``decide`` stopped
with an internal error on one). ``decide`` refuses such evidence before judging it, naming the first
sample, with the words and bounds the loader holds a profile's prices to
(``profile.measurements.MIN_CALL_US`` / ``MAX_CALL_US``, docs/profile.md "Bounds on the numbers").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from topo_gate._units import us_text
from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.measurements import MAX_CALL_US, MIN_CALL_US


def check_sample_bounds(evidence: Mapping[str, Any]) -> None:
    """``ProfileInvalid`` naming the first sample outside its bounds: an all-reduce call's (a
    result's samples and its replays after a larger size) in ``[MIN_CALL_US, MAX_CALL_US]``, a layer
    graph's (``context``, the GEMM alone included) at most ``MAX_CALL_US``."""
    for where, samples, floor in _series(evidence):
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


def _series(evidence: Mapping[str, Any]) -> Iterator[tuple[str, Sequence[float], float]]:
    for r, run in enumerate(evidence.get("runs") or ()):
        for c, result in enumerate(run.get("results") or ()):
            at = f"runs[{r}].results[{c}]"
            yield f"{at}.samples_us", result.get("samples_us") or (), MIN_CALL_US
            yield f"{at}.after_larger_us", result.get("after_larger_us") or (), MIN_CALL_US
            for a, after in enumerate(result.get("after_sizes") or ()):
                yield f"{at}.after_sizes[{a}].samples_us", after.get("samples_us") or (), MIN_CALL_US
        for e, entry in enumerate(run.get("context") or ()):
            yield f"runs[{r}].context[{e}].samples_us", entry.get("samples_us") or (), 0.0
