"""Start one process per rank of a benchmark script with the torch.distributed env rendezvous.

The benchmarks run outside the trial runner on purpose (they time it, or compare against it), so
they bring their own minimal launcher: the same env contract as the runner and ``torchrun``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist

RANK_FLAG = "--as-rank"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn_ranks(script: Path, world_size: int, argv: list[str], timeout_s: float) -> None:
    """Run ``script argv --as-rank`` in ``world_size`` processes; raise if any fails or times out."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world_size))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *argv, RANK_FLAG],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
        )
        for rank in range(world_size)
    ]
    try:
        codes = [proc.wait(timeout=timeout_s) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    if any(codes):
        raise SystemExit(f"ranks exited with {codes}")


def init_rank() -> tuple[int, int, torch.device]:
    """Inside a rank: pin the GPU and join the NCCL group. Returns (rank, world_size, device)."""
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    return rank, world_size, device
