"""Timing of one collective call, per rank: the interface the worker loop drives.

The contract (the worker loop calls exactly this):

- ``make_timer(device, group, graph_calls, warmup) -> Timer``
- ``Timer.prepare(call, after_capture=None) -> Measurable``: warm the call up and make it repeatable
  ``graph_calls`` times (CUDA: capture ``graph_calls`` calls in one CUDA graph, then run the
  backend's collective ``after_capture`` hook; CPU: a plain loop of the call).
- ``Timer.measure(measurable, preroll=None) -> Sample``: align the ranks, run the ``graph_calls``
  calls once, and return this rank's latency per call plus the residual start skew across ranks.
  ``preroll``: another measurable replayed instead of the usual pre-roll (step 0), e.g. a larger
  size's graph, to time the calls right after a size transition;
- ``Timer.prepare(..., calls=N)``: capture ``N`` calls instead of ``graph_calls`` (layer graphs);
- ``Timer.replay(measurable)``: run it once, untimed, and wait for it (the correctness checks).

The group latency (slowest rank) is formed later by the runner from every rank's samples, so a
``Sample`` is one rank's view only.

How the CUDA timer controls rank skew (DESIGN.md, Measurement), per ``measure``:

0. one untimed replay of the same graph (the pre-roll), so the timed replay follows calls of its
   own backend and size, as a launcher's decode steps do. Without it the replay after the
   largest size paid for the state that size left behind: TRT-LLM's Lamport one-shot clears the
   buffers of the previous message on its next calls, and at 1 token right after 8192 tokens it
   read 32.9 us/call instead of the 3.1 measured with the pre-roll (2x H200, K=32; the cost is
   per replay, so it also made K=32 and K=64 disagree by 37%). That cost is real for a launcher
   mixing sizes, so it is not dropped: the worker times it on purpose (``measure(m, preroll=...)``
   after a graph of the largest size) and ``decide`` charges it (its rule 5);
1. a device-side spin (``torch.cuda._sleep``) is queued next, long enough that the host has queued
   everything below before the GPU reaches step 2 -- otherwise the host's launch latency between
   the alignment and the replay is timed as if it were the collective's. Its length starts from a
   measurement: ``prepare`` times the host's launch of one replay (it grows with the graph's node
   count: ~200 us for 64 NCCL calls on an H200 host) and the spin covers three of those plus
   100 us for the alignment's own launch; the spin's cycles-per-microsecond is calibrated once.
   That first guess proved too short inside the worker (many graphs alive, a busier host): at
   K=64 the ranks' elapsed times spread by 15-40 us and every small size read 5-20% slow. So the
   spin also adapts: a replay whose rank spread exceeds ``SKEW_LIMIT`` of its length is discarded
   and retried with twice the spin, which that graph keeps for its later samples (an idle spin
   costs GPU time, never accuracy);
2. a one-element NCCL all-reduce on the same stream aligns the ranks on the device: no rank's
   stream passes it before every rank has arrived;
3. start event, one replay of the graph of ``graph_calls`` calls, end event;
4. per call = elapsed / ``graph_calls``.

Residual skew estimate: after step 2 the ranks still start step 3 at slightly different instants
(the all-reduce's completion reaches them at different times). A collective cannot finish on one
rank before every rank has contributed to its last call, so all ranks finish the replay at about
the same instant, and the rank that started earliest measures the longest interval. The spread
``max - min`` of the ranks' elapsed times for the same replay is therefore the start skew (plus any
difference in finishing, so it is an upper bound). It is gathered after the end event, so the
gather is not timed. Its effect on the per-call figure is ``skew / graph_calls``, which is why K
is chosen so that a replay is long against it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Sample:
    """One rank's measurement of one replay: mean latency per call, and the start skew across ranks
    (``max - min`` of the ranks' start instants, microseconds; ``None`` when it cannot be known)."""

    per_call_us: float
    skew_us: float | None


class Measurable(Protocol):
    """Whatever ``Timer.prepare`` returns; opaque to the worker loop."""


class Timer(Protocol):
    def prepare(
        self,
        call: Callable[[], None],
        after_capture: Callable[[], None] | None = None,
        calls: int | None = None,
    ) -> Measurable: ...

    def measure(self, measurable: Measurable, preroll: Measurable | None = None) -> Sample: ...

    def replay(self, measurable: Measurable) -> None: ...


@dataclass(frozen=True)
class _CpuLoop:
    call: Callable[[], None]
    calls: int


class CpuTimer:
    """Wall-clock timing of ``graph_calls`` back-to-back calls on the CPU (gloo harness).

    There is no graph on the CPU; what matters here is that the harness runs the same method as on
    a GPU: warm-up, a pre-roll, rank alignment right before the start instant, K calls per sample,
    skew reported.
    Ranks are aligned with a barrier; the skew is the spread of the instants at which ranks leave it.
    It is read from ``time.perf_counter_ns`` (CLOCK_MONOTONIC, shared by every process of one host),
    so it is only meaningful when all ranks share a host, which is how the CPU harness runs.
    """

    def __init__(self, group: Any, graph_calls: int, warmup: int) -> None:
        self.group = group
        self.graph_calls = graph_calls
        self.warmup = warmup

    def prepare(
        self,
        call: Callable[[], None],
        after_capture: Callable[[], None] | None = None,
        calls: int | None = None,
    ) -> _CpuLoop:
        # Nothing is captured on the CPU, so there is nothing for ``after_capture`` to register.
        for _ in range(self.warmup):
            call()
        return _CpuLoop(call, calls or self.graph_calls)

    def replay(self, measurable: Measurable) -> None:
        assert isinstance(measurable, _CpuLoop)
        for _ in range(measurable.calls):
            measurable.call()

    def measure(self, measurable: Measurable, preroll: Measurable | None = None) -> Sample:
        assert isinstance(measurable, _CpuLoop)
        # The pre-roll, as on a GPU (CudaGraphTimer, step 0): the timed calls follow calls of their
        # own size, or of ``preroll``'s.
        self.replay(preroll or measurable)
        dist.barrier(group=self.group)
        start_ns = time.perf_counter_ns()
        for _ in range(measurable.calls):
            measurable.call()
        elapsed_ns = time.perf_counter_ns() - start_ns
        # Gathered after the timed region so the gather itself is not measured.
        starts = torch.tensor([start_ns], dtype=torch.int64)
        gathered = [torch.zeros_like(starts) for _ in range(dist.get_world_size(self.group))]
        dist.all_gather(gathered, starts, group=self.group)
        spread_ns = max(int(t.item()) for t in gathered) - min(int(t.item()) for t in gathered)
        return Sample(per_call_us=elapsed_ns / measurable.calls / 1e3, skew_us=spread_ns / 1e3)


@dataclass
class _CapturedGraph:
    graph: torch.cuda.CUDAGraph
    #: The captured call, kept alive with the graph: the graph holds raw device addresses, not
    #: references, so the tensors the call closes over must live as long as the graph replays.
    call: Callable[[], None]
    #: Device spin before the alignment, in GPU clock cycles (module docstring, step 1); grows when
    #: the ranks' spread shows the host was still launching inside the timed region.
    headstart_cycles: int
    calls: int


class CudaGraphTimer:
    """``graph_calls`` calls captured in one CUDA graph, timed with CUDA events around one replay,
    ranks aligned on the device right before the start event (see the module docstring)."""

    #: Host time to queue the alignment all-reduce and the events, on top of the replay's launch.
    ALIGN_LAUNCH_US = 100.0
    #: Safety factor on the measured replay launch time (host jitter).
    LAUNCH_MARGIN = 3.0
    #: Rank spread, as a fraction of the replay, above which the spin is doubled (step 1).
    SKEW_LIMIT = 0.02
    #: The spin never grows past this many microseconds: 20 ms is far beyond any graph launch.
    MAX_HEADSTART_US = 20_000.0

    def __init__(self, device: torch.device, group: Any, graph_calls: int, warmup: int) -> None:
        self.device = device
        self.group = group
        self.graph_calls = graph_calls
        self.warmup = warmup
        self._align = torch.zeros(1, dtype=torch.float32, device=device)
        self._elapsed = torch.zeros(1, dtype=torch.float32, device=device)
        self._gathered = torch.zeros(dist.get_world_size(group), dtype=torch.float32, device=device)
        self._cycles_per_us = self._calibrate_spin()

    def _calibrate_spin(self, cycles: int = 2_000_000) -> float:
        """GPU clock cycles per microsecond of ``torch.cuda._sleep`` on this device, right now."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)  # the first spin ramps the clocks up; time the second
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        return cycles / (start.elapsed_time(end) * 1e3)

    def prepare(
        self,
        call: Callable[[], None],
        after_capture: Callable[[], None] | None = None,
        calls: int | None = None,
    ) -> _CapturedGraph:
        calls = calls or self.graph_calls
        # Warm up on a side stream, as torch.cuda.graph requires: first calls may compile (Triton),
        # allocate or bind workspaces, none of which may happen inside the capture.
        current = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                call()
        current.wait_stream(side)
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                call()
        torch.cuda.synchronize(self.device)
        if after_capture is not None:
            after_capture()
        graph.replay()  # the first replay uploads the graph; time the launch of the second
        torch.cuda.synchronize(self.device)
        launch_started = time.perf_counter()
        graph.replay()
        launch_us = (time.perf_counter() - launch_started) * 1e6
        torch.cuda.synchronize(self.device)
        headstart_us = self.ALIGN_LAUNCH_US + self.LAUNCH_MARGIN * launch_us
        return _CapturedGraph(graph, call, int(headstart_us * self._cycles_per_us), calls)

    def replay(self, measurable: Measurable) -> None:
        assert isinstance(measurable, _CapturedGraph)
        measurable.graph.replay()
        torch.cuda.synchronize(self.device)

    def measure(self, measurable: Measurable, preroll: Measurable | None = None) -> Sample:
        assert isinstance(measurable, _CapturedGraph)
        assert preroll is None or isinstance(preroll, _CapturedGraph)
        longest = int(self.MAX_HEADSTART_US * self._cycles_per_us)
        while True:
            elapsed_us, spread_us, slowest_us = self._replay_timed(measurable, preroll or measurable)
            # Every rank sees the same spread, so every rank decides alike and the ranks stay in step.
            if spread_us <= self.SKEW_LIMIT * slowest_us or measurable.headstart_cycles >= longest:
                return Sample(per_call_us=elapsed_us / measurable.calls, skew_us=spread_us)
            # The host was still launching inside the timed region (step 1): retry with twice the spin.
            measurable.headstart_cycles = min(2 * measurable.headstart_cycles, longest)

    def _replay_timed(
        self, measurable: _CapturedGraph, preroll: _CapturedGraph
    ) -> tuple[float, float, float]:
        """One pre-rolled, aligned, timed replay: (this rank's elapsed, rank spread, slowest rank), us."""
        stream = torch.cuda.current_stream(self.device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        preroll.graph.replay()  # the pre-roll (module docstring, step 0)
        torch.cuda._sleep(measurable.headstart_cycles)
        dist.all_reduce(self._align, group=self.group)
        start.record(stream)
        measurable.graph.replay()
        end.record(stream)
        end.synchronize()
        elapsed_us = start.elapsed_time(end) * 1e3
        self._elapsed.fill_(elapsed_us)
        dist.all_gather_into_tensor(self._gathered, self._elapsed, group=self.group)
        slowest_us = float(self._gathered.max())
        return elapsed_us, slowest_us - float(self._gathered.min()), slowest_us


def make_timer(device: torch.device, group: Any, graph_calls: int, warmup: int) -> Timer:
    """The timer for ``device``: CUDA-graph timing on a GPU, wall-clock loop on the CPU."""
    if device.type == "cpu":
        return CpuTimer(group, graph_calls, warmup)
    if device.type == "cuda":
        return CudaGraphTimer(device, group, graph_calls, warmup)
    raise ValueError(f"no timer for device type {device.type!r}")
