"""Settings for the whole suite.

Hypothesis's per-example deadline (200 ms) and its too-slow health check measure wall time, which on a
shared 2-core CI machine says more about the neighbours than about the code: a property test must fail
on a wrong answer, never on a slow moment. Timing targets live in benchmarks/ instead.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


import os  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _environment_left_as_found():
    """A test that changes ``os.environ`` without monkeypatch leaks into every later test, and into the
    subprocesses they start: `exec` and the plugins read the user's own env from it. Fail the test that
    leaks (naming the variables), and put the environment back so the rest of the suite is unaffected."""
    before = _environment()
    yield
    after = _environment()
    if after != before:
        for name in set(after) - set(before):
            del os.environ[name]
        os.environ.update(before)
        changed = sorted(set(before.items()) ^ set(after.items()))
        pytest.fail(f"the test left os.environ changed: {sorted({name for name, _ in changed})}")


def _environment() -> dict[str, str]:
    # pytest itself sets PYTEST_CURRENT_TEST around each phase of a test.
    return {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}


@pytest.fixture
def restore_environment():
    """For tests that import a real launcher: its import sets variables of its own (SGLang and vLLM set
    TORCHINDUCTOR_CACHE_DIR and others at import time), which are the launcher's, not a leak of the test.
    Put the environment back before the leak check runs."""
    before = dict(os.environ)
    yield
    for name in set(os.environ) - set(before):
        del os.environ[name]
    os.environ.update(before)


import signal  # noqa: E402

#: The signals a command turns into an interrupt (exit 130); a test that leaves one ignored or caught
#: makes every later in-process command, and every child a later test starts, handle it differently.
_INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _signals_left_as_found():
    """Fail the test that leaves SIGINT, SIGTERM or SIGHUP handled otherwise than it found them (the
    suite's full runs once saw a probe outlive SIGHUP), and put them back for the tests after it."""
    before = {signum: signal.getsignal(signum) for signum in _INTERRUPTS}
    yield
    changed = [signum for signum in _INTERRUPTS if signal.getsignal(signum) is not before[signum]]
    for signum in changed:
        signal.signal(signum, before[signum])
    if changed:
        pytest.fail(f"the test left {', '.join(signal.Signals(s).name for s in changed)} handled differently")


import secrets  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

#: In this pytest process's environment for the whole session, so every process the suite starts
#: carries it, an orphan too (whose parent died, so its parent chain no longer leads here). One value
#: per pytest process: each xdist worker sets its own over the controller's, and checks only its own.
SESSION_MARKER = "PYTEST_TOPO_GATE_SESSION"
#: How long a process the suite started may take to exit after the last test before it counts as
#: left behind (a group just sent SIGKILL takes milliseconds; this is room for a loaded machine).
LEFT_BEHIND_GRACE_S = 10.0


def pytest_configure(config: pytest.Config) -> None:
    os.environ[SESSION_MARKER] = f"{os.getpid()}-{secrets.token_hex(8)}"
    # pytest-xdist's workers inherit COLUMNS=80 from their start-up, which a plain run does not have:
    # commands that wrap for a terminal would then wrap under -n 2 only. Output captured by a test
    # is a pipe's; a test of a terminal's width sets COLUMNS itself.
    os.environ.pop("COLUMNS", None)


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind():
    """Fail the run when a process the suite started is still alive after its last test (a stand-in
    benchmark sleeping forever, a worker whose runner was killed): the process is a child of this
    pytest process, or carries this session's marker in its environment. Each gets a grace period
    to exit; what is left is named (with the test it was started in) and ended."""
    yield
    if not Path("/proc/self/environ").exists():
        return  # no /proc (not Linux): nothing to scan
    deadline = time.monotonic() + LEFT_BEHIND_GRACE_S
    left = _started_by_this_session()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _started_by_this_session()
    if not left:
        return
    for pid in left:
        _end(pid)
    pytest.fail(
        "processes the suite started were still running after its last test (now ended): "
        + "; ".join(f"pid {pid}: {what}" for pid, what in sorted(left.items())),
        pytrace=False,
    )


def _started_by_this_session() -> dict[int, str]:
    """Live processes (zombies aside) whose parent chain leads to this pytest process or whose
    environment carries its marker: pid -> its command line and the test it was started in."""
    me, marker = os.getpid(), f"{SESSION_MARKER}={os.environ.get(SESSION_MARKER, '')}".encode()
    parents: dict[int, int] = {}
    environs: dict[int, list[bytes]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue  # exited while we looked
        if state == "Z":
            continue
        parents[int(entry.name)] = int(parent)
        try:
            environs[int(entry.name)] = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            pass  # not ours to read
    found = {}
    for pid in parents:
        chain, at = set(), pid
        while at in parents and at not in chain:
            chain.add(at)
            at = parents[at]
        environ = environs.get(pid, [])
        if at == me or marker in environ:
            found[pid] = _described(pid, environ)
    return found


def _described(pid: int, environ: list[bytes]) -> str:
    """The command line, and the test pytest was running when it started (``PYTEST_CURRENT_TEST``,
    which the process inherited)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        command = "?"
    described = repr(command.strip())
    for item in environ:
        name, _, value = item.partition(b"=")
        if name == b"PYTEST_CURRENT_TEST":
            described += f" (started during {value.decode(errors='replace')})"
    return described


def _end(pid: int) -> None:
    """SIGKILL the process, and its whole group where it leads one that is not pytest's own."""
    try:
        group = os.getpgid(pid)
        if group == pid and group != os.getpgrp():
            os.killpg(group, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
