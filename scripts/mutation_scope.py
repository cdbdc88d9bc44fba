"""Which mutants a run judges: the modules a change touches, the lines it touched, and what fits the cap.

``scripts/mutation.py --changed`` (CI) mutates only the modules of the mutation core (``MODULES``)
that changed since the base commit recorded in ``tests/mutation/base-commit``, and in each only the
mutants on the lines that changed (a module whose *test files* changed has every mutant in scope:
a weakened test lowers the kill rate of code that did not change). Within the time cap the mutants in
scope run in a fixed pseudo-random order (``--seed``) until the cap's share for the module is spent;
the rest are reported as left to the full run. Without the base commit in this clone's history (a
shallow clone, a tarball) it says so loudly and mutates ``FALLBACK_MODULES`` whole instead.

Why not cosmic-ray's own ``cr-filter-git`` (cosmic_ray/tools/filters/git.py in 8.7.0) for the lines:
it can diff against the base commit (its ``filters.git-filter.branch`` goes to ``git diff`` as it
is), but it does not select the same mutants. A hunk that only deletes lines (``+N,0``) marks no line
there (``range(start, start + 0)``), so a change that deletes a guard puts nothing in scope; here the
two lines around the gap are. It reads ``git diff`` alone, so an untracked new module is out. And it
works by marking a session's work items skipped after ``git diff --relative BRANCH .`` in its working
directory, whereas the sessions here live in scratch copies that are no git work tree, and the same
lines also pick the knock-out mutants of ``mutation_data.py``, which are no cosmic-ray work items.
"""

from __future__ import annotations

import random
import re
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BASE_FILE = REPO / "tests" / "mutation" / "base-commit"
#: Mutated whole when the base commit cannot be found: the most direct guards, and cheap (a few
#: minutes on 2 cores): the NCCL-forcing sets and the multicast-off settings.
FALLBACK_MODULES = (
    "topo_gate/launchers/sglang.py",
    "topo_gate/launchers/vllm.py",
    "topo_gate/launchers/trtllm.py",
    "topo_gate/trials/safety.py",
)
#: CPython 3.11's parser is not safe to run in two threads at once ("AST constructor recursion depth
#: mismatch"): the targets run in threads, so every ast.parse here takes this lock.
AST_LOCK = threading.Lock()
SCOPE_PATHS = ("topo_gate", "tests")  # where the core's modules and their test files live
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Selection:
    """One target's part of a ``--changed`` run: the lines in scope (None: all) and why, in words."""

    lines: frozenset[int] | None
    why: str


def read_base_commit(path: Path = BASE_FILE) -> str | None:
    """The commit of the first line of ``path`` that is neither a comment nor names modules: the base
    of every module without a base of its own."""
    return next((commit for commit, modules in _base_lines(path) if not modules), None)


def read_module_bases(path: Path = BASE_FILE) -> dict[str, str]:
    """Modules with a base of their own (a line ``COMMIT MODULE ...``): the commit of their last whole
    run. A module joins the core, or has its whole run recorded, without moving every other module's
    base past changes that no whole run has judged yet."""
    bases: dict[str, str] = {}
    for commit, modules in _base_lines(path):
        for module in modules:
            if module in bases:
                raise ValueError(f"{path.name}: {module} has two base commits")
            bases[module] = commit
    return bases


def _base_lines(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    if not path.exists():
        return []
    found = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        words = raw.split("#", 1)[0].split()
        if words:
            found.append((words[0], tuple(words[1:])))
    return found


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-c", "core.quotePath=false", *args], cwd=repo, capture_output=True, text=True
        )
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def changed_lines(base: str, repo: Path = REPO) -> dict[str, frozenset[int]]:
    """Every file under SCOPE_PATHS changed since ``base`` (committed or not, untracked included) ->
    its changed lines, numbered in today's file. Where lines were only deleted, the two lines around the gap count.
    A file moved since ``base`` is compared with what it was before the move (git's rename detection, at its
    default 50% similarity): only the lines the move changed count, and a pure move changes none."""
    diff = _git(
        repo, "diff", "--unified=0", "--no-color", "--no-ext-diff", "--find-renames", base, "--", *SCOPE_PATHS
    )
    if diff is None:
        raise RuntimeError(f"git diff {base} failed")
    found: dict[str, set[int]] = {}
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[len("+++ b/") :] if line.startswith("+++ b/") else None  # /dev/null: deleted
            if path is not None:
                found.setdefault(path, set())
        elif path is not None and (hunk := _HUNK.match(line)):
            start, count = int(hunk[1]), int(hunk[2] or 1)
            found[path].update(range(start, start + count) if count else (start, start + 1))
    for path in (
        _git(repo, "ls-files", "--others", "--exclude-standard", "--", *SCOPE_PATHS) or ""
    ).splitlines():
        file = repo / path
        if file.is_file():
            found[path] = set(range(1, len(file.read_bytes().splitlines()) + 2))
    return {path: frozenset(lines) for path, lines in found.items()}


def select(
    targets: Iterable[Any], base: str | None, repo: Path = REPO, module_bases: Mapping[str, str] | None = None
) -> tuple[list[tuple[Any, Selection]], list[str]]:
    """The targets a change since ``base`` touches, each with its selection, and lines to print.
    ``module_bases``: modules compared with a base of their own instead (``read_module_bases``)."""
    targets = list(targets)
    module_bases = dict(module_bases or {})
    unknown = sorted(b for b in {base, *module_bases.values()} if b is not None and not _is_commit(repo, b))
    if base is None or unknown:
        where = (
            "no base commit recorded"
            if base is None
            else f"base commit {', '.join(unknown)} is not in this clone's history"
        )
        chosen = [
            (t, Selection(None, "fallback set, whole module"))
            for t in targets
            if t.module in FALLBACK_MODULES
        ]
        banner = "!" * 100
        return chosen, [
            banner,
            f"WARNING: {where} (a shallow clone?): mutating the fallback set instead, whole:",
            f"WARNING:   {', '.join(FALLBACK_MODULES)}",
            f"WARNING: the changed lines are NOT mutation-tested in this run. Fetch the history "
            f"(git fetch --unshallow) or fix {BASE_FILE.relative_to(REPO)}.",
            banner,
        ]
    assert base is not None
    changes: dict[str, dict[str, frozenset[int]]] = {}  # one diff per distinct base
    chosen = []
    for target in targets:
        since = module_bases.get(target.module, base)
        if since not in changes:
            changes[since] = changed_lines(since, repo)
        changed = changes[since]
        tests = sorted({test.split("::")[0] for test in target.tests} & changed.keys())
        if target.module in changed:
            chosen.append((target, Selection(changed[target.module], f"changed since {since[:12]}")))
        elif tests:
            chosen.append(
                (target, Selection(None, f"its tests changed since {since[:12]} ({', '.join(tests)})"))
            )
    core = {target.module for target in targets}
    changed = changes[base] if base in changes else changed_lines(base, repo)
    outside = sorted(p for p in changed if p.startswith("topo_gate/") and p.endswith(".py") and p not in core)
    notes = [f"mutation scope: changes since {base[:12]} ({BASE_FILE.relative_to(REPO)})"]
    own = sorted(m for m in module_bases if m in core)
    if own:
        notes.append(f"  {len(own)} module(s) since their own base (their last whole run): {', '.join(own)}")
    if outside:
        notes.append(f"changed, not in the mutation core (scripts/mutation.py MODULES): {', '.join(outside)}")
    if not chosen:
        notes.append("no module of the mutation core changed: nothing to mutate")
    return chosen, notes


def _is_commit(repo: Path, revision: str) -> bool:
    return _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}") is not None


def seeded_order(jobs: Iterable[tuple[Any, ...]], seed: int, label: str) -> list[Any]:
    """``(sort key..., job)`` tuples -> the jobs in a pseudo-random order fixed by seed and label."""
    ordered = [entry[-1] for entry in sorted(jobs, key=lambda entry: entry[:-1])]
    random.Random(f"{seed}/{label}").shuffle(ordered)
    return ordered


class Budget:
    """A wall-clock cap shared by the targets of one run, ``jobs`` of them running at once."""

    def __init__(self, seconds: float | None, jobs: int, targets: int) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.jobs = max(1, jobs)
        self._unfinished = max(1, targets)
        self._lock = threading.Lock()

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def share(self) -> float | None:
        """Seconds one target may still spend: what is left, spread over the targets not yet done."""
        left = self.remaining()
        with self._lock:
            unfinished = self._unfinished
        return None if left is None else left * min(self.jobs, unfinished) / unfinished

    def finished(self) -> None:
        with self._lock:
            self._unfinished = max(1, self._unfinished - 1)


def annotation_spans(module: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the module's annotations are, if it never evaluates them (``from __future__ import
    annotations``): ``str | None`` -> ``str & None`` there changes nothing, so it is no mutant."""
    import ast

    with AST_LOCK:
        tree = ast.parse(module.read_text(encoding="utf-8"))
    postponed = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )
    if not postponed:
        return []
    found = []
    for node in ast.walk(tree):
        annotations: list[ast.expr] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [arguments.vararg, arguments.kwarg]
            annotations = [a.annotation for a in every if a is not None and a.annotation is not None]
            annotations += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        found += [
            ((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0)) for a in annotations
        ]
    return found


def in_spans(position: tuple[int, int], spans: list[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    return any(start <= tuple(position) < end for start, end in spans)


def out_of_scope(
    start: tuple[int, int],
    end: tuple[int, int],
    definition: str | None,
    functions: tuple[str, ...],
    annotations: list[tuple[tuple[int, int], tuple[int, int]]],
    lines: frozenset[int] | None,
) -> str | None:
    """Why a mutant at ``start``..``end`` inside ``definition`` is not judged, or None if it is."""
    if functions and definition not in functions:
        return "out of scope"
    if in_spans(start, annotations):
        return "annotation (never evaluated)"
    if lines is not None and not lines.intersection(range(start[0], end[0] + 1)):
        return "not on a changed line"
    return None
