"""``--metric-regex`` bounded: Python's ``re`` backtracks, and ``--timeout`` bounds the benchmark, not
the read of its output (``(a+)+$`` on a 40-character line never returns).

Two bounds, both needed:

- ``backtracking_problem`` refuses, before any run, the shapes that backtrack exponentially: a
  repeat (``+``, ``*``, ``{30}``) whose body holds a repeat of varying length or a choice of
  alternatives (``(a+)+``, ``(a?){30}``, ``(a|aa)*``), and backreferences. Possessive repeats and atomic groups never backtrack and pass.
- ``search_all`` puts a time limit on the read itself (``MATCH_SECONDS``): what the static rule
  lets through can still be polynomial (``\\d*\\d*\\d*x`` on 16 MiB of digits). ``re`` checks for
  signals while it matches, so a timer signal ends it; the run then has no metric, with the reason.
"""

from __future__ import annotations

import importlib
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The standard library's own regex parser: the pattern as ``re`` compiles it, not a reading of ours.
# (``re._parser`` since Python 3.11, ``sre_parse`` before; neither is in the type stubs.)
_PRIVATE = sys.version_info >= (3, 11)
sre_parse: Any = importlib.import_module("re._parser" if _PRIVATE else "sre_parse")
sre_constants: Any = importlib.import_module("re._constants" if _PRIVATE else "sre_constants")

#: The longest a read of one run's stdout may take (a metric regex on a 16 MiB tail takes < 1 s).
MATCH_SECONDS = 10.0

_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT}
_NO_BACKTRACK = {
    getattr(sre_constants, name)
    for name in ("POSSESSIVE_REPEAT", "ATOMIC_GROUP")
    if hasattr(sre_constants, name)
}
_BACKREFERENCES = {sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS}
_ALTERNATIVES = {sre_constants.BRANCH}


class MatchOvertime(Exception):
    """The read of a run's output ran past ``MATCH_SECONDS``."""


def backtracking_problem(pattern: str) -> str | None:
    """Why ``pattern`` (a valid regex) could backtrack exponentially, in a few words; None if it cannot."""
    return _problem(sre_parse.parse(pattern), repeated=False)


def _problem(items: Any, *, repeated: bool) -> str | None:
    for op, arg in items:
        if op in _NO_BACKTRACK:
            continue
        if op in _BACKREFERENCES:
            return "a backreference (\\1, (?P=name), (?(1)...)) can backtrack exponentially"
        if op in _REPEATS:
            low, high, body = arg
            if repeated and low != high:
                return "a repeat inside a repeat ((a+)+, (a?){30}) backtracks exponentially"
            problem = _problem(body, repeated=repeated or high > 1)
        elif op in _ALTERNATIVES:
            if repeated:
                return "alternatives inside a repeat ((a|aa)*) backtrack exponentially"
            problem = next((p for branch in arg[1] if (p := _problem(branch, repeated=False))), None)
        elif op == sre_constants.SUBPATTERN:
            problem = _problem(arg[-1], repeated=repeated)
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            problem = _problem(arg[1], repeated=repeated)
        else:  # a literal, a character class, an anchor: one step each
            problem = None
        if problem:
            return problem
    return None


def search_all(regex: re.Pattern[str], text: str, *, seconds: float | None = None) -> list[re.Match[str]]:
    """Every match of ``regex`` in ``text``; ``MatchOvertime`` past ``seconds`` (``MATCH_SECONDS``)."""
    with _deadline(MATCH_SECONDS if seconds is None else seconds):
        return list(regex.finditer(text))


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """``MatchOvertime`` in this thread after ``seconds``, through ``SIGALRM`` (the main thread only:
    elsewhere, and where there is no ``setitimer``, only the static rule bounds the match). A timer
    already pending (someone else's) is put back with the time it had left, and a sooner one shortens
    ours (then fires at once after it)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def overtime(signum: int, frame: object) -> None:
        raise MatchOvertime(f"matching took longer than {seconds:g} s")

    pending, interval = signal.getitimer(signal.ITIMER_REAL)
    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, overtime)
    signal.setitimer(signal.ITIMER_REAL, min(seconds, pending) if pending else seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pending:
            signal.setitimer(signal.ITIMER_REAL, max(pending - (time.monotonic() - started), 1e-6), interval)
