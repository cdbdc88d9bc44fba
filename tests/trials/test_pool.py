"""worker/pool.py in-process on a one-rank gloo group: a session's patterns share backend instances, so
each is set up once and closed once, after every pattern (counted calls, not timing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch  # the pool builds real backends, which are torch code
import torch.distributed as dist

from topo_gate.trials.backends.base import BackendContext
from topo_gate.trials.backends.cpu import GlooRingAllReduce
from topo_gate.trials.worker.pool import BackendPool


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    store = Path(tmp_path_factory.mktemp("store")) / "rendezvous"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def context(group: object, pattern: str) -> BackendContext:
    return BackendContext(
        rank=0, world_size=1, local_rank=0, device=torch.device("cpu"), dtype=torch.bfloat16,
        hidden=16, max_tokens=8, pattern=pattern, allow_multicast=False, group=group,
    )  # fmt: skip


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"setup": 0, "close": 0}

    def count(what: str):
        def hook(self: GlooRingAllReduce) -> None:
            calls[what] += 1

        return hook

    monkeypatch.setattr(GlooRingAllReduce, "setup", count("setup"))
    monkeypatch.setattr(GlooRingAllReduce, "close", count("close"))
    return calls


def test_a_composite_runs_on_the_plain_patterns_instance_set_up_once(world: object, counted: dict) -> None:
    pool = BackendPool()
    plain, reason = pool.admit("gloo_ring", context(world, "allreduce"))
    assert reason is None and plain is not None
    pool.setup(plain)
    composite, reason = pool.admit("gloo_ring+rmsnorm", context(world, "allreduce_rmsnorm"))
    assert reason is None and composite is not None
    assert composite.plain is plain  # type: ignore[attr-defined]
    pool.setup(composite)
    pool.setup(plain)  # a later pattern asking again
    assert counted == {"setup": 1, "close": 0}
    closed: list[str] = []
    pool.close_all(lambda backend: closed.append(backend.name))
    assert closed == ["gloo_ring+rmsnorm", "gloo_ring"]  # the composite before its plain instance
    assert counted == {"setup": 1, "close": 1}


def test_a_composite_asked_first_sets_its_plain_instance_up_for_the_plain_pattern(
    world: object, counted: dict
) -> None:
    pool = BackendPool()
    composite, _ = pool.admit("gloo_ring+rmsnorm", context(world, "allreduce_rmsnorm"))
    assert composite is not None
    pool.setup(composite)
    plain, _ = pool.admit("gloo_ring", context(world, "allreduce"))
    assert composite.plain is plain  # type: ignore[attr-defined]
    pool.setup(plain)
    assert counted["setup"] == 1
    # The baseline of each pattern is its own instance (its ctx says which norm follows).
    first, _ = pool.admit("gloo", context(world, "allreduce"))
    second, _ = pool.admit("gloo", context(world, "allreduce_rmsnorm"))
    assert first is not second


def test_admission_problems_are_reasons(world: object) -> None:
    pool = BackendPool()
    assert pool.admit("no_such_backend", context(world, "allreduce"))[1].startswith("unknown backend")
    backend, reason = pool.admit("gloo_ring+rmsnorm", context(world, "allreduce"))
    assert reason == "does not implement the allreduce pattern"
    backend, reason = pool.admit("nccl", context(world, "allreduce"))
    assert reason is not None and "CUDA" in reason
