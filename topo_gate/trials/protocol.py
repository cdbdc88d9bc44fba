"""The files a runner and its workers exchange in one attempt's folder. Stdlib only.

Results travel through files, never stdout (a backend or library may print anything there):

- ``heartbeat.rank<R>.json``: rewritten by the worker at every step (pattern, phase, backend, size,
  round). The runner's watchdog bounds the time between two heartbeats and, when it fires, blames the
  pattern and backend the heartbeat names.
- ``result.<pattern>.rank<R>.json``: the rank's verdicts and raw samples of one pattern, written as
  soon as that pattern is done, so a fault in a later pattern leaves it measured.
- ``session.rank<R>.json``: the session's own record (software, the start-up and teardown phases,
  the patterns left out for the deadline), rewritten after the rendezvous, at each such decision and
  at the end.
- ``worker.rank<R>.log``: the worker's stderr and stdout, written by the runner's redirection.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

RANK_RESULT_FORMAT = "topo-gate/rank-result/v2"
SESSION_FORMAT = "topo-gate/rank-session/v1"

#: Phases in order. "start" covers interpreter, torch import and rendezvous; the backend phases name
#: the pattern and backend (and size) in flight; "begin" starts a pattern (a fault there is outside
#: any backend, within that pattern); "done" is written after the last result file. After "measure":
#: "transition" (a size right after the largest), "context" (layer-like graphs), "recheck" (the
#: captured graphs checked with fresh inputs).
PHASES = (
    "start", "begin", "admit", "setup", "check", "prepare", "measure", "transition", "context", "recheck", "close", "done",
)  # fmt: skip
BACKEND_PHASES = frozenset(
    {"admit", "setup", "check", "prepare", "measure", "transition", "context", "recheck", "close"}
)


def heartbeat_path(folder: Path, rank: int) -> Path:
    return folder / f"heartbeat.rank{rank}.json"


def result_path(folder: Path, rank: int, pattern: str) -> Path:
    return folder / f"result.{pattern}.rank{rank}.json"


def session_path(folder: Path, rank: int) -> Path:
    return folder / f"session.rank{rank}.json"


def log_path(folder: Path, rank: int) -> Path:
    return folder / f"worker.rank{rank}.log"


@dataclass(frozen=True)
class Beat:
    """One heartbeat: what a rank is doing now. ``seq`` increases with every beat."""

    seq: int
    phase: str
    pattern: str | None = None
    backend: str | None = None
    tokens: int | None = None
    round: int | None = None
    step: int = 0  # work units done, of ``steps`` (0 while unknown), for progress bars
    steps: int = 0

    def where(self) -> str:
        """Human words for the place, e.g. "check of gloo_ring at 64 tokens (round 3)" (the pattern is
        the result's own, so only a pattern's start names it: "starting allreduce_rmsnorm")."""
        if self.phase == "begin":
            return f"starting {self.pattern}"
        words = self.phase if self.backend is None else f"{self.phase} of {self.backend}"
        if self.tokens is not None:
            words += f" at {self.tokens} tokens"
        if self.round is not None:
            words += f" (round {self.round})"
        return words


class Heartbeat:
    """The worker side: ``beat(phase, ...)`` replaces the rank's heartbeat file. ``pattern`` is the
    pattern in flight (set by the worker as each pattern starts)."""

    def __init__(self, folder: Path, rank: int) -> None:
        self._path = heartbeat_path(folder, rank)
        self._tmp = self._path.with_name(f".{self._path.name}.tmp")
        self._seq = 0
        self.pattern: str | None = None
        self.step = 0
        self.steps = 0

    def beat(
        self, phase: str, backend: str | None = None, tokens: int | None = None, round: int | None = None
    ) -> None:
        self._seq += 1
        beat = Beat(self._seq, phase, self.pattern, backend, tokens, round, self.step, self.steps)
        # Replace without fsync: a heartbeat lost to a machine crash costs nothing, and the worker
        # beats thousands of times per run (between samples, never inside one).
        self._tmp.write_text(json.dumps(asdict(beat)), encoding="utf-8")
        os.replace(self._tmp, self._path)


def read_heartbeat(folder: Path, rank: int) -> Beat | None:
    """The rank's latest beat, or None before its first one."""
    try:
        return Beat(**json.loads(heartbeat_path(folder, rank).read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
