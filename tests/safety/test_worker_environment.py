"""The multicast-off settings reach every trial worker whatever the caller's environment says.

DESIGN.md principle 5: a trial never creates NVLink multicast objects unless the user passed
``--allow-multicast``. The runner (``trials.runner.run_trial_session``) sets the three variables over the
caller's environment; the worker's own refusal is the second line of defence, not the first. So
here the caller's environment (the process's, and ``run_trial_session``'s ``env``) holds the unsafe values,
and each real worker process, started by the runner on the gloo CPU harness, reports the
environment it was given: a ``sitecustomize`` module on the workers' ``PYTHONPATH`` writes
``os.environ`` to a file as the interpreter starts, before the worker's code runs.

The expected values are the libraries' own switches, written here by hand: NCCL_NVLS_ENABLE=0 (no
NVLink SHARP), TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (torch symmetric memory without multimem),
NVSHMEM_DISABLE_NVLS=1. Relies on: ``run_trial_session(SessionPlan((plan,)), device="cpu", cuda_devices=[],
timeout_s, workdir, env, startup_timeout_s)``, ``TrialPlan.allow_multicast``, and workers being Python processes
that inherit the runner's ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from topo_gate.trials.plan import SessionPlan, TrialPlan
from topo_gate.trials.runner import run_trial_session

pytestmark = pytest.mark.slow

SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
UNSAFE = {"NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0", "NVSHMEM_DISABLE_NVLS": "0"}

REPORTER = """\
import json, os
with open(os.path.join({folder!r}, f"env-{{os.getpid()}}.json"), "w", encoding="utf-8") as report:
    json.dump(dict(os.environ), report)
"""


def _plan(*, allow_multicast: bool) -> TrialPlan:
    # The smallest run the harness accepts: two ranks, one size, the baseline alone.
    return TrialPlan(
        tp=2, group=(0, 1), group_class="cpu", pattern="allreduce", dtype="bfloat16", hidden=32,
        tokens=(1,), backends=("gloo",), graph_calls=2, rounds=2, warmup=1, allow_multicast=allow_multicast,
    )  # fmt: skip


def _workers_environments(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    allow_multicast: bool,
    process_env: dict,
    run_env: dict,
    cuda_devices: tuple[str, ...] = (),
) -> list[dict[str, str]]:
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "sitecustomize.py").write_text(REPORTER.format(folder=str(reports)), encoding="utf-8")
    for name in SAFE:
        monkeypatch.delenv(name, raising=False)
    for name, value in process_env.items():
        monkeypatch.setenv(name, value)
    path = os.pathsep.join(filter(None, [str(reports), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    (result,) = run_trial_session(
        SessionPlan((_plan(allow_multicast=allow_multicast),)), device="cpu", cuda_devices=list(cuda_devices), timeout_s=120.0,
        workdir=tmp_path / "trials", env=run_env, startup_timeout_s=120.0,
    ).runs  # fmt: skip
    seen = [json.loads(report.read_text(encoding="utf-8")) for report in sorted(reports.glob("env-*.json"))]
    workers = [env for env in seen if "RANK" in env]
    assert sorted(env["RANK"] for env in workers) == ["0", "1"], (result.error, seen)
    assert result.error is None and result.backends["gloo"].status == "ok", (result.error, result.backends)
    return workers


@pytest.mark.parametrize("where", ["process environment", "run_trial_session env"])
def test_a_callers_unsafe_values_never_reach_a_worker(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_process = where == "process environment"
    workers = _workers_environments(
        tmp_path, monkeypatch, allow_multicast=False,
        process_env=UNSAFE if in_process else {}, run_env={} if in_process else UNSAFE,
    )  # fmt: skip
    for env in workers:
        for name, value in SAFE.items():
            assert env.get(name) == value, f"rank {env['RANK']} got {name}={env.get(name)!r}"


def test_allow_multicast_is_what_lets_the_callers_values_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = _workers_environments(
        tmp_path, monkeypatch, allow_multicast=True, process_env={}, run_env=UNSAFE
    )
    for env in workers:
        assert {name: env.get(name) for name in UNSAFE} == UNSAFE, f"rank {env['RANK']}"


def test_the_cpu_harness_hides_every_gpu_from_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gloo trial must not touch a GPU others may be using: even when the caller names GPUs, the
    workers of a ``device="cpu"`` session see none (an empty CUDA_VISIBLE_DEVICES), in bus order."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    workers = _workers_environments(
        tmp_path, monkeypatch, allow_multicast=False, process_env={}, run_env={}, cuda_devices=("3", "5")
    )
    for env in workers:
        assert env["CUDA_VISIBLE_DEVICES"] == "", f"rank {env['RANK']}"
        assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_a_cuda_session_gives_its_workers_exactly_the_groups_gpus() -> None:
    """On a GPU node the group's GPUs, and only they, are visible to each worker, numbered in PCI bus
    order as NVML and the plan number them. (Built as ``run_trial_session`` builds it: no GPU needed.)"""
    from topo_gate.trials.runner import _Launch

    launch = _Launch(
        device="cuda", cuda_devices=("3", "5"), base_env={"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
        timeout_s=10.0, startup_timeout_s=10.0, port_source=lambda: 29500,
    )  # fmt: skip
    plan = SessionPlan((_plan(allow_multicast=False),))
    for rank in (0, 1):
        env = launch.worker_env(plan, rank, 29500)
        assert env["CUDA_VISIBLE_DEVICES"] == "3,5" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert (env["RANK"], env["WORLD_SIZE"]) == (str(rank), "2")
        assert {name: env[name] for name in SAFE} == SAFE
