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
