"""The screens a person reads, rendered through the real CLI in this process, as golden files.

``cases.yaml`` is the table: each case a command line (its inputs the bundled profiles under
``profiles/`` and the fixtures under ``tests/fixtures/``) rendered at each of its terminal widths into
``screens/<name>-<columns>.txt``, stdout and stderr interleaved as a terminal shows them. The cases
marked ``docs`` are also written to ``docs/screens/`` by the same render, so the docs and the goldens
cannot drift apart. Regenerate them all with one command (also what ``scripts/screens.sh`` runs)::

    python tests/golden/regenerate.py

Every render is made deterministic here, in ``normalised`` (and the environment it runs in, less
``_changes_a_screen``'s variables), and nowhere else: each case runs in a
fresh scratch folder, which is written ``./``, with the input folders linked into it (``INPUTS``),
so inputs are named by repository-relative paths; the repository's own path is cut where a command
resolves a link; a time this render itself wrote (the run's ``Created`` stamp, a log folder's name)
is written ``<now>``, while the times the inputs record are kept; this process's id is written
``<pid>``; this topo-gate's version, where it signs a time of the render, ``<version>``; a progress
bar's elapsed time is written ``0:00:00``; a ``pipe`` case runs with no terminal on the standard
file descriptors (``_no_terminal``); the spaces rich pads a line with to the terminal's width
are cut (a pid or a time of another length pads its line differently).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from topo_gate._version import __version__
from topo_gate.cli import main

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CASES = HERE / "cases.yaml"
SCREENS = HERE / "screens"
DOCS_SCREENS = REPO / "docs" / "screens"
REGENERATE = "python tests/golden/regenerate.py"
#: The repository's folders a case reads its inputs from, linked into its scratch folder: a case names
#: them as relative paths, so a screen shows the same path (and wraps the same) in every checkout.
INPUTS = ("profiles", "tests")
#: Left out of every render's environment (``_changes_a_screen``); a case sets what it needs itself.
OWN_VARIABLES = "TOPO_GATE_"
TERMINAL_VARIABLES = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "LINES")
#: The width a case names for output to a pipe or a file (no COLUMNS, not a terminal).
PIPE = "pipe"

#: A time the render wrote is within this of the render's own start and end: the slack covers a
#: stamp rounded down to its second, and nothing an input records comes near today's clock.
OWN_TIME_SLACK = timedelta(seconds=5)
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
_COMPACT_TIME = re.compile(r"\d{8}T\d{6}Z")
#: rich's elapsed-time column at the end of a progress line ("12/12 0:00:00").
_ELAPSED = re.compile(r"(?<= )\d+:\d\d:\d\d(?= *$)", re.MULTILINE)


@dataclass(frozen=True)
class Case:
    """One screen at one width: its command line, environment and where its expected text lives."""

    name: str
    columns: int | None  # None: a pipe, where ``recommend --explain`` writes each line whole (for grep)
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0
    until: str | None = None  # the screen ends after the line holding this (what follows is not shown)
    bench: dict[str, Any] | None = None  # the ab stand-in's scenario (tests/ab/data/fake_bench.py)
    docs: bool = False
    # The screen says what is installed: the modules it finds, and those it says are missing.
    installed: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    file: str | None = None  # the screen is this file the command wrote (a report), not what it printed
    slow: bool = False  # takes seconds (a replay re-decides; show and report plan every launcher)

    @property
    def id(self) -> str:
        return f"{self.name}-{PIPE if self.columns is None else self.columns}"

    @property
    def golden(self) -> Path:
        return SCREENS / f"{self.id}.txt"


def load_cases() -> list[Case]:
    """Every case of ``cases.yaml`` at each of its widths."""
    table = yaml.safe_load(CASES.read_text(encoding="utf-8"))
    cases = []
    for entry in table:
        for columns in entry["columns"]:
            cases.append(
                Case(
                    name=entry["name"],
                    columns=None if columns == PIPE else columns,
                    args=tuple(entry["args"]),
                    env=dict(entry.get("env", {})),
                    exit_code=entry.get("exit", 0),
                    until=entry.get("until"),
                    bench=entry.get("bench"),
                    docs=entry.get("docs", False),
                    installed=tuple(entry.get("installed", ())),
                    absent=tuple(entry.get("absent", ())),
                    file=entry.get("file"),
                    slow=entry.get("slow", False),
                )
            )
    return cases


def not_this_machine(case: Case) -> str | None:
    """Why this machine cannot show the case's screen (what it has installed differs), or None."""
    present = [name for name in case.absent if importlib.util.find_spec(name) is not None]
    missing = [name for name in case.installed if importlib.util.find_spec(name) is None]
    if present or missing:
        return (
            f"the screen is of a machine with {case.installed or 'none'} and without {case.absent} installed"
        )
    return None


def render(case: Case) -> str:
    """The case's screen as a terminal of its width shows it, normalised (see the module's docstring)."""
    started = datetime.now(timezone.utc)
    with tempfile.TemporaryDirectory(prefix="topo-gate-screen-") as scratch_name:
        scratch = Path(scratch_name).resolve()
        env: dict[str, str | None] = {name: None for name in os.environ if _changes_a_screen(name)}
        env.update({"COLUMNS": None if case.columns is None else str(case.columns), **case.env})
        if case.bench is not None:
            env.update(_stand_in_bench(case.bench, scratch))
        for name in INPUTS:
            (scratch / name).symlink_to(REPO / name)
        runner = CliRunner()
        terminal = _no_terminal() if case.columns is None else nullcontext()
        with _inside(scratch), terminal, runner.isolation(env=env) as (_, _, shown):
            if case.until is not None:
                sys.stdout = _ReaderThatStops(sys.stdout, case.until)
            code = main(list(case.args))
            sys.stdout.flush()
            sys.stderr.flush()
        text = shown.getvalue().decode("utf-8")
        if case.file is not None:
            text = (scratch / case.file).read_text(encoding="utf-8")
        if case.until is None and code != case.exit_code:
            raise AssertionError(f"{case.id}: exit {code}, expected {case.exit_code}:\n{text}")
        if case.until is not None:
            text = text[: text.index("\n", text.index(case.until)) + 1]
        return normalised(text, scratch, started, datetime.now(timezone.utc))


def normalised(text: str, scratch: Path, started: datetime, ended: datetime) -> str:
    """The one place a render is made the same on every run and machine (the module's docstring says how)."""
    text = text.replace(f"{scratch}/", "./").replace(str(scratch), ".")
    text = text.replace(f"{REPO}/", "")

    def own_time(stamp: str, pattern: str) -> bool:
        moment = datetime.strptime(stamp, pattern).replace(tzinfo=timezone.utc)
        return started - OWN_TIME_SLACK <= moment <= ended + OWN_TIME_SLACK

    text = _ISO_TIME.sub(
        lambda m: "<now>" if own_time(m.group()[:19] + "Z", "%Y-%m-%dT%H:%M:%SZ") else m.group(), text
    )
    text = _COMPACT_TIME.sub(lambda m: "<now>" if own_time(m.group(), "%Y%m%dT%H%M%SZ") else m.group(), text)
    text = text.replace(f"<now>-{os.getpid()}", "<now>-<pid>")
    text = text.replace(f"<now> by topo-gate {__version__}", "<now> by topo-gate <version>")
    text = _ELAPSED.sub("0:00:00", text)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _changes_a_screen(name: str) -> bool:
    """A variable of the shell the render runs in that would change what it shows: topo-gate's own
    (a node fingerprint, a release override) and rich's colour and terminal switches."""
    return name.startswith(OWN_VARIABLES) or name in TERMINAL_VARIABLES


def write_all() -> list[Path]:
    """Render every case into its golden file, and the docs' cases into docs/screens/ as well."""
    SCREENS.mkdir(exist_ok=True)
    DOCS_SCREENS.mkdir(exist_ok=True)
    written = []
    for case in load_cases():
        if not_this_machine(case):
            print(f"kept {case.golden.relative_to(REPO)}: {not_this_machine(case)}", file=sys.stderr)
            continue
        text = render(case)
        targets = [case.golden] + ([DOCS_SCREENS / f"{case.id}.txt"] if case.docs else [])
        for target in targets:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


@contextmanager
def _inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _no_terminal() -> Iterator[None]:
    """Standard file descriptors that are no terminal, as a pipe's are: without ``COLUMNS`` rich (and
    click) would size themselves to a terminal found on any of them (regenerating from a shell)."""
    saved = {fd: os.dup(fd) for fd in (0, 1, 2)}
    for stream in (sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    try:
        with open(os.devnull, "r+b") as nothing:
            for fd in saved:
                os.dup2(nothing.fileno(), fd)
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _stand_in_bench(bench: dict[str, Any], scratch: Path) -> dict[str, str]:
    """The tests' stand-in benchmark (tests/ab/data/fake_bench.py) on PATH under ``bench["command"]``,
    as a shell wrapper the way a launcher's console script is one, driven by the case's scenario."""
    folder = scratch / "bin"
    folder.mkdir()
    program = folder / bench["command"]
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO}/tests/ab/data/fake_bench.py" "$@"\n')
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    scenario = {
        **bench["scenario"],
        "state": str(scratch / "bench-state.json"),
        "pidfile": str(scratch / "bench.pid"),
        "template": str(REPO / bench["scenario"]["template"]),
    }
    path = scratch / "scenario.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")
    # Named by a relative PATH entry (the command runs in the scratch folder) so the screen says
    # ./bin/vllm whatever the scratch folder's path, and wraps its lines the same everywhere.
    return {"PATH": f"./bin{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_BENCH_SCENARIO": str(path)}


class ScreenEnded(Exception):
    """The screen's last line was written: the command is stopped there (a case's ``until``)."""


class _ReaderThatStops:
    """stdout read by a reader that stops once it has the line holding ``marker`` (``| awk '... exit'``):
    the write that carries it raises ScreenEnded, so the command stops where the screen ends (the
    probe's preflight, before its trials start). Not BrokenPipeError: rich answers that by pointing
    the process's own stdout at /dev/null."""

    def __init__(self, stream: Any, marker: str) -> None:
        self._stream = stream
        self._marker = marker
        self._seen = ""

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        self._seen = (self._seen + text)[-(len(self._marker) + len(text)) :]
        if self._marker in self._seen:
            self._stream.flush()  # before the stderr the command writes as it stops
            raise ScreenEnded(self._marker)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
