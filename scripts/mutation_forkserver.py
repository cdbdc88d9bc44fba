"""A warm pytest for mutation runs: cosmic-ray runs its test command once per mutant, and on a 2-core
machine most of that time is Python importing pytest, hypothesis and torch again. The server imports
those third-party modules once (never topo_gate, so each mutant's source is read fresh) and forks a
child per request that runs ``pytest.main`` on the mutated copy; the client is cosmic-ray's test
command and exits with the child's status.

    python scripts/mutation_forkserver.py serve SOCKET TIMEOUT_S   # in the copy, before the run
    python scripts/mutation_forkserver.py run SOCKET [--serve-timeout=S] PYTEST-ARGS...  # a test run

The client prints the end of pytest's output (its summary names the failing test). A child that
outlives TIMEOUT_S is killed with its whole process group (the workers a runner test
started included) and reported as a failure, as cosmic-ray counts a hung mutant as killed. SIGTERM
stops the server and the child in progress with it (the runner's time cap).
"""

from __future__ import annotations

import os
import socket
import sys

# What the mapped test files import that is slow to import and is not the code under test.
#: A request may start with this option: its own time limit, instead of the server's.
TIMEOUT_OPTION = "--serve-timeout="
WARM_MODULES = ("pytest", "hypothesis", "yaml", "jsonschema", "click", "rich", "torch", "torch.distributed")


def serve(path: str, timeout_s: float) -> None:
    import importlib
    import signal
    import time

    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    assert not any(name.startswith("topo_gate") for name in sys.modules), "the server must not load topo_gate"
    running: list[int] = []  # the child of the request in progress

    def stop(signum: int, frame: object) -> None:
        # The runner stops the server (its run is over, or the time cap came): the tests in progress,
        # and the workers they started, go with it.
        for child in running:
            for kill in (os.killpg, os.kill):  # os.kill: a child stopped before it made its group
                try:
                    kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    while True:
        connection, _ = server.accept()
        with connection:
            request = b""
            while chunk := connection.recv(65536):
                request += chunk
            args = [arg.decode() for arg in request.split(b"\0")]
            if args == ["stop"]:
                return
            limit_s = timeout_s
            if args and args[0].startswith(TIMEOUT_OPTION):  # this request's own limit
                limit_s, args = float(args[0][len(TIMEOUT_OPTION) :]), args[1:]
            log = f"{path}.out"
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.setpgid(0, 0)  # its own group: a timeout kills the workers it started too
                output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(output, 1)
                os.dup2(output, 2)
                import pytest

                os._exit(int(pytest.main(args)))
            running[:] = [pid]
            deadline = time.monotonic() + limit_s
            status = None
            while status is None:
                done, raw = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = os.waitstatus_to_exitcode(raw)
                elif time.monotonic() > deadline:
                    os.killpg(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status = 124
                else:
                    time.sleep(0.01)
            running.clear()
            with open(log, "rb") as written:
                tail = written.read()[-4000:]  # pytest's summary: which test failed
            if status == 124:
                tail += f"\ntimeout: killed after {limit_s:g} s\n".encode()
            try:
                connection.sendall(bytes([status & 0xFF]) + tail)
            except OSError:
                pass  # cosmic-ray gave up on this client already


def run(path: str, args: list[str]) -> int:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
    except OSError as error:
        print(f"fork server unreachable: {error}")  # scripts/mutation.py counts the mutant as not run
        return 125
    client.sendall(b"\0".join(arg.encode() for arg in args))
    client.shutdown(socket.SHUT_WR)
    answer = b""
    while chunk := client.recv(65536):
        answer += chunk
    sys.stdout.write(answer[1:].decode("utf-8", "replace"))
    return answer[0] if answer else 125


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(run(sys.argv[2], sys.argv[3:]))
