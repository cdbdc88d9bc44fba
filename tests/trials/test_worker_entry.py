"""The worker as its own program: safety refusals, and the plain env rendezvous torchrun uses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gloo_helpers import gloo_plan

from topo_gate.trials.plan import SessionPlan, session_to_spec
from topo_gate.trials.protocol import result_path
from topo_gate.trials.results import merge_rank_results
from topo_gate.trials.safety import SAFETY_ENV

WORKER = [sys.executable, "-m", "topo_gate.trials.worker"]


def write_spec(folder: Path, plan) -> Path:
    spec = folder / "spec.json"
    spec.write_text(json.dumps(session_to_spec(SessionPlan((plan,)), device="cpu")))
    return spec


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rendezvous_env(rank: int, world: int, port: int) -> dict[str, str]:
    return {
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
        "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
    }  # fmt: skip


# A wrong value (multicast switched on) must be refused like a missing one.
UNSAFE = [("NCCL_NVLS_ENABLE", None), ("NCCL_NVLS_ENABLE", "1"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", None),
          ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "0"), ("NVSHMEM_DISABLE_NVLS", None), ("NVSHMEM_DISABLE_NVLS", "0")]  # fmt: skip


@pytest.mark.parametrize(("missing", "wrong"), UNSAFE)
def test_worker_refuses_to_start_without_each_safety_setting(
    missing: str, wrong: str | None, workdir: Path
) -> None:
    env = {**os.environ, **SAFETY_ENV, **rendezvous_env(0, 2, 1)}
    del env[missing]
    if wrong is not None:
        env[missing] = wrong
    spec = write_spec(workdir, gloo_plan())
    done = subprocess.run(
        [*WORKER, "--spec", str(spec), "--out", str(workdir)], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("topo-gate worker: refusing to start without")
    assert f"{missing}={SAFETY_ENV[missing]}" in lines[0]
    assert "torch" not in done.stderr  # refused before torch was imported


@pytest.mark.slow
def test_allow_multicast_lifts_the_safety_refusal_but_not_the_rendezvous(workdir: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in SAFETY_ENV}
    spec = write_spec(workdir, gloo_plan(allow_multicast=True))
    done = subprocess.run(
        [*WORKER, "--spec", str(spec), "--out", str(workdir)], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == "topo-gate worker: RANK is not set (env rendezvous)"


@pytest.mark.slow
def test_worker_runs_under_torchrun(workdir: Path) -> None:
    plan = gloo_plan(backends=("gloo",))
    spec = write_spec(workdir, plan)
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [
        str(torchrun), "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        "-m", "topo_gate.trials.worker", "--spec", str(spec), "--out", str(workdir),
    ]  # fmt: skip
    done = subprocess.run(
        command, env={**os.environ, **SAFETY_ENV}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rank_results = [json.loads(result_path(workdir, rank, "allreduce").read_text()) for rank in range(2)]
    backends, cells = merge_rank_results(plan, rank_results)
    assert backends["gloo"].status == "ok"
    assert [cell["status"] for cell in cells] == ["ok"] * len(plan.tokens)
