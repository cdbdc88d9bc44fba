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


#: Fixtures shared by many tests that take tens of seconds to build on a loaded 2-core machine: the
#: report of both bundled H200 runs (every figure rendered), both runs loaded (each load re-decides;
#: their figure specs, a bootstrap per speed-up, are built on them), and step_rule's two profiles
#: decided from the bundled evidence. Under ``-n 2`` each xdist worker builds its own copy of a
#: module- or session-scoped fixture, so each was built twice.
SHARED_ONCE = ("both_runs_report", "both_runs", "h200")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the tests that use one of SHARED_ONCE in one xdist group (named after the fixture), so
    under --dist loadgroup one worker runs them and builds the fixture once. A test already in a
    group (the "processes" group) stays in it. Then name each test's group in its node id, which is
    how --dist loadgroup finds it."""
    for item in items:
        definitions = getattr(item, "_fixtureinfo", None)
        if definitions is None or item.get_closest_marker("xdist_group") is not None:
            continue  # not a function (no fixtures to share), or already grouped
        for name in SHARED_ONCE:
            if name in definitions.name2fixturedefs:
                item.add_marker(pytest.mark.xdist_group(f"built-once-{name}"))
                break
    if getattr(config.option, "loadgroup", False):
        _group_in_node_ids(items)


def _group_in_node_ids(items: list[pytest.Item]) -> None:
    """pytest-xdist 3.8.0 appends ``@group`` to a grouped test's node id by setting ``item._nodeid``,
    which pytest 9.2 no longer has (the id is the structured ``item._id``): there every group was
    silently ignored, the "processes" group too, and its tests ran on both workers at once. Append it
    where pytest keeps the id now; where ``_nodeid`` still exists, xdist's own hook does it."""
    from _pytest.nodeid import NodeId

    for item in items:
        if hasattr(item, "_nodeid") or not hasattr(item, "_id"):
            continue
        groups = {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                  for mark in item.iter_markers("xdist_group")}  # fmt: skip
        if groups:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(sorted(groups))}")
