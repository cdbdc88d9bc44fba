"""The decode-step benchmark's torch side in-process on a one-rank gloo group: the steps it builds are
checked as the trials check (a wrong or unwritten output fails), and paths no trial times are refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch  # the benchmark's rank code is torch code; its tests run it for real
import torch.distributed as dist
from _decode_graph import Kernels, Model, check, sequence

from topo_gate.profile.schema import FUSED_PATTERN
from topo_gate.trials.backends.base import BackendContext
from topo_gate.trials.worker.timing import CpuTimer

STEPS = (4, 1, 1)  # a "prefill" of 4 tokens, then two decode steps of 1


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackendContext]:
    store = Path(tmp_path_factory.mktemp("store")) / "rendezvous"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield BackendContext(
        rank=0, world_size=1, local_rank=0, device=torch.device("cpu"), dtype=torch.bfloat16, hidden=16,
        max_tokens=4, pattern=FUSED_PATTERN, allow_multicast=False, group=dist.group.WORLD,
    )  # fmt: skip
    dist.destroy_process_group()


@pytest.fixture
def parts(ctx: BackendContext) -> Iterator[tuple[Model, Kernels, CpuTimer]]:
    kernels = Kernels(ctx)
    yield Model(ctx, sites=2, sizes=(1, 4)), kernels, CpuTimer(ctx.group, graph_calls=2, warmup=1)
    kernels.close()


NAMES = ("gloo_ring+rmsnorm", "gloo", "gloo")


def admitted(kernels: Kernels, names=NAMES, steps=STEPS) -> None:
    """The script asks every name's reason first (admission and setup are collectives)."""
    assert all(kernels.reason(name, t) is None for name, t in zip(names, steps, strict=True))


def test_a_correct_sequence_passes_on_the_values_the_gemms_write(parts) -> None:
    model, kernels, timer = parts
    admitted(kernels)
    measurable = timer.prepare(sequence(model, kernels, STEPS, NAMES))
    model.load_checkable()
    assert check(timer, measurable, model, STEPS) == {
        "ok": True,
        "max_abs_err": pytest.approx(0, abs=0.05),
        "reason": None,
    }
    # The GEMMs copy the integer inputs: what the all-reduce summed is exactly the expected input.
    assert torch.equal(model.buffers[4].x, model.expected_x(4))


def test_a_wrong_sum_at_one_size_fails_the_check(parts) -> None:
    model, kernels, timer = parts
    admitted(kernels)
    steps = sequence(model, kernels, STEPS, NAMES)

    def wrong_residual_at_4_tokens() -> None:  # injected fault: one element off by one
        steps()
        model.buffers[4].residual_out[0, 3] += 1

    measurable = timer.prepare(wrong_residual_at_4_tokens)
    model.load_checkable()
    verdict = check(timer, measurable, model, STEPS)
    assert not verdict["ok"] and "4 tokens: residual_out" in verdict["reason"]
    assert "first mismatch at [0, 3]" in verdict["reason"]


def test_an_output_no_step_writes_fails_the_check(parts) -> None:
    model, kernels, timer = parts
    admitted(kernels, ("gloo",), (4,))
    prefill_only = sequence(model, kernels, (4,), ("gloo",))  # the 1-token buffers stay poisoned
    measurable = timer.prepare(prefill_only)
    model.load_checkable()
    verdict = check(timer, measurable, model, STEPS)
    assert not verdict["ok"] and "1 tokens" in verdict["reason"] and "NaN" in verdict["reason"]


def test_paths_no_trial_times_or_that_cannot_run_here_are_refused_with_the_reason(parts) -> None:
    _, kernels, _ = parts
    assert kernels.reason("mnnvl_vllm", 1) == "mnnvl_vllm: not a trial backend (no trial times this path)"
    assert (
        "nccl: " in (kernels.reason("nccl", 1) or "") and "cuda" in (kernels.reason("nccl", 1) or "").lower()
    )
    assert kernels.reason("gloo", 1) is None


def test_after_capture_calls_each_backend_of_the_sequence_once(parts) -> None:
    _, kernels, _ = parts
    for name in ("gloo_ring+rmsnorm", "gloo"):
        kernels.reason(name, 1)
    seen = []
    for name, backend in kernels.backends.items():
        backend.after_capture = lambda name=name: seen.append(name)  # counted calls
    kernels.after_capture(["gloo", "gloo_ring+rmsnorm", "gloo"])()
    assert seen == ["gloo", "gloo_ring+rmsnorm"]
