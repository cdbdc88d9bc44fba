"""The worker processes of one attempt, and the rendezvous port they meet on. Stdlib only.

No orphans: each worker leads its own process group, which takes in anything it spawns; the groups
are killed on every way out of an attempt (success, fault, exception, Ctrl-C, SIGTERM), and only then
are the workers reaped, so a group id can never be a recycled one. A worker whose runner was
SIGKILLed exits by itself (it watches its parent).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from topo_gate.trials.protocol import log_path

KILL_GRACE_S = 3.0  # between SIGTERM and SIGKILL: lets NCCL and CUDA tear down cleanly
POLL_S = 0.1


def free_port() -> int:
    """A port that binds on 127.0.0.1 right now. Another process may still take it before rank 0
    binds it; the runner then sees the rendezvous fail and relaunches on a fresh port."""
    for _ in range(16):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port_bindable(port):
            return port
    raise OSError("no free TCP port on 127.0.0.1 for the rendezvous")


def port_bindable(port: int) -> bool:
    """Whether a listening socket can take ``port`` on 127.0.0.1 now (what rank 0's TCPStore does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Workers:
    """The worker processes of one attempt. Leaving the ``with`` block kills and reaps all of them."""

    def __init__(self) -> None:
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

    def start(self, rank: int, spec: Path, folder: Path, env: Mapping[str, str]) -> None:
        command = [sys.executable, "-m", "topo_gate.trials.worker", "--spec", str(spec), "--out", str(folder)]
        with log_path(folder, rank).open("wb") as log:
            self._processes[rank] = subprocess.Popen(
                command,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                # Its own session and process group: Ctrl-C in the terminal reaches only the runner,
                # which then stops the workers in order, and killpg reaches anything a worker spawned.
                start_new_session=True,
            )

    def exits(self) -> dict[int, int]:
        """Rank -> exit status (negative: killed by that signal) of the ranks that have exited.
        Uses WNOWAIT so exited workers stay unreaped zombies: their pids, and so their process
        group ids, cannot be reused before ``kill`` signals the groups."""
        statuses = {}
        for rank, process in self._processes.items():
            info = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None and info.si_pid != 0:
                exited = info.si_code == os.CLD_EXITED
                statuses[rank] = info.si_status if exited else -info.si_status
        return statuses

    def kill(self) -> None:
        """SIGTERM every group, wait up to KILL_GRACE_S, SIGKILL every group, then reap."""
        self._signal_groups(signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE_S
        while len(self.exits()) < len(self._processes) and time.monotonic() < deadline:
            time.sleep(POLL_S / 2)
        self._signal_groups(signal.SIGKILL)  # also reaches grandchildren that outlived their leader
        for process in self._processes.values():
            process.wait()

    def _signal_groups(self, signum: signal.Signals) -> None:
        for process in self._processes.values():
            try:
                os.killpg(process.pid, signum)
            except ProcessLookupError:
                pass  # the group is empty: nothing left to stop


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while trials run, so the ``finally`` that kills the
    workers runs for ``kill <runner>`` too (Python's default SIGTERM action skips it)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        # None: the previous handler was not set from Python; the default is the closest match.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
