"""Running one target's mutants: cosmic-ray's session, or the knock-out mutants of a constant.

Under a time cap (``Plan.budget``) each target gets a share of what is left of the cap when it starts
(``Budget.share``). Every mutant in scope is first held back, then released in a fixed pseudo-random
order (``mutation_scope.seeded_order``), a batch at a time: a first batch of three, which times what
a mutant costs, then as many as the rest of the share allows at that cost; a batch still running
when the share ends is stopped.
What was released but not run when the cap came is "over the cap"; what was never released, "not
sampled". Both are left to the full run.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mutation_report import LEFT_OUT, Mutant, failing_test, key
from mutation_scope import AST_LOCK, Budget, Selection, annotation_spans, in_spans, out_of_scope, seeded_order

UNREACHABLE = "fork server unreachable"  # what its client prints when no test could run
NOT_SAMPLED = LEFT_OUT[0]  # a mutant in scope that a time cap never released
#: A mutant in scope that another shard of a sharded run judges (``--shard K/N``): skipped here.
OTHER_SHARD = "in another shard"
#: Under a time cap, the first batch of a module: it times what one mutant really costs here.
MIN_MUTANTS = 3

# Operator replacements that only ever produce a TypeError on this code (shifts, powers, modulo of
# strings, ordering against None) cost a test run each and say nothing: cosmic-ray's full table has
# 11 replacements per arithmetic operator. What is left: + - * / among themselves, | & ^ among
# themselves, and every comparison except an ordering against `is`.
EXCLUDED_OPERATORS = (
    r"core/ReplaceBinaryOperator_\w+_(Pow|RShift|LShift|FloorDiv|Mod)$",
    r"core/ReplaceBinaryOperator_(Add|Sub|Mul|Div|FloorDiv|Mod|Pow|LShift|RShift)_(BitOr|BitAnd|BitXor)$",
    r"core/ReplaceBinaryOperator_(BitOr|BitAnd|BitXor)_(Add|Sub|Mul|Div)$",
    r"core/ReplaceComparisonOperator_(Lt|LtE|Gt|GtE)_(Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot)_(Lt|LtE|Gt|GtE)$",
)


@dataclass(frozen=True)
class Plan:
    """What one target's run may do: which mutants (``selection``; None: all) and in how long."""

    selection: Selection | None
    budget: Budget
    seed: int
    #: ``(k, n)``: judge only the k-th of every n mutants in the seeded order (``--shard K/N``), so that
    #: n machines or processes share one module's whole run; None: every mutant.
    shard: tuple[int, int] | None = None

    def in_shard(self, order: list[Any]) -> list[Any]:
        """The part of ``order`` (every mutant in scope, in the seeded order) this shard judges."""
        if self.shard is None:
            return order
        k, n = self.shard
        return order[k::n]

    @property
    def lines(self) -> frozenset[int] | None:
        return None if self.selection is None else self.selection.lines


def reopen(session: Path, jobs: list[str]) -> None:
    """Forget the results of ``jobs``: cosmic-ray runs them at its next ``exec``."""
    with sqlite3.connect(session) as db:
        db.executemany("DELETE FROM work_results WHERE job_id = ?", [(job,) for job in jobs])


def scope_words(why: str, mutants: list[Mutant]) -> str:
    if not why and not any(m.outcome in LEFT_OUT for m in mutants):
        return ""
    in_scope = [m for m in mutants if m.outcome != "skipped"]
    left = sum(1 for m in in_scope if m.outcome in LEFT_OUT)
    words = f"{why}; " if why else ""
    words += f"{len(in_scope)} mutant(s) in scope, {len(in_scope) - left} run"
    return words + (f", {left} left to the full run (time cap)" if left else "")


@dataclass
class Run:
    """One target's mutants, run through the warm pytest ``command`` in ``copy``."""

    target: Any  # scripts/mutation.py Target
    copy: Path
    env: dict[str, str]
    command: list[str]
    timeout_s: float
    plan: Plan
    per_mutant_s: float  # the estimate until the first batch has been timed
    until: float | None = None  # this target's share of the cap ends here (time.monotonic); None: no cap

    def time_left(self) -> float | None:
        """What this target may still spend: its share of the cap, within the cap itself."""
        if self.until is None:
            return None
        left = min(self.until - time.monotonic(), self.plan.budget.remaining() or 0.0)
        return max(0.0, left)

    def batch_size(self, first: bool) -> int:
        """How many more mutants fit in what is left of this target's share (0: none). The first batch
        is small: it times the real cost of a mutant (cosmic-ray's own work included)."""
        left = self.time_left()
        if left is None:
            return sys.maxsize
        if left <= 0:
            return 0
        estimate = max(1, int(left / max(self.per_mutant_s, 0.1)))
        return min(MIN_MUTANTS, estimate) if first else estimate

    def cosmic_ray(self, equivalents: dict[tuple[str, str, str], str]) -> list[Mutant]:
        target, copy = self.target, self.copy
        config = copy / "cosmic-ray.toml"
        config.write_text(cosmic_ray_config(target, self.command, timeout=self.timeout_s), encoding="utf-8")
        session = copy / "session.sqlite"
        cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
        # A kept session (--survivors) runs what was reopened in it -- its survivors, and what a time
        # cap left out -- in batches like a fresh one, so a cap can split a full run over sittings.
        if not session.exists():
            subprocess.run([*cosmic, "init", str(config), str(session)], cwd=copy, env=self.env, check=True)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "cosmic_ray.tools.filters.operators_filter",
                    str(session),
                    str(config),
                ],
                cwd=copy,
                env=self.env,
                check=True,
            )
        order = self.hold_back(session)
        module = copy / target.module
        original = module.read_bytes()
        released = 0
        while released < len(order):
            count = self.batch_size(first=released == 0)
            if count == 0:
                break
            batch, released = order[released : released + count], released + count
            reopen(session, batch)
            began = time.monotonic()
            try:
                subprocess.run(
                    [*cosmic, "exec", str(config), str(session)],
                    cwd=copy,
                    env=self.env,
                    check=True,
                    timeout=self.time_left(),
                )
                self.per_mutant_s = max(0.1, (time.monotonic() - began) / len(batch))
            except subprocess.TimeoutExpired:
                # The cap: what ran is judged, the rest is left over. cosmic-ray was stopped midway,
                # perhaps with a mutant applied: the module is put back before its lines are read.
                module.write_bytes(original)
                break
        return read_session(session, copy, equivalents, target.functions)

    def hold_back(self, session: Path) -> list[str]:
        """Mark every mutant out of scope as skipped, and every one in scope as not sampled yet;
        return those in the order they are to run."""
        from cosmic_ray.work_db import WorkDB, use_db
        from cosmic_ray.work_item import WorkerOutcome, WorkResult

        annotations = annotation_spans(self.copy / self.target.module)
        in_scope = []
        with use_db(str(session), WorkDB.Mode.open) as db:
            for item in list(db.pending_work_items):
                mutation = item.mutations[0]
                why = out_of_scope(
                    tuple(mutation.start_pos), tuple(mutation.end_pos), mutation.definition_name,
                    self.target.functions, annotations, self.plan.lines,
                )  # fmt: skip
                if why is None:
                    in_scope.append((tuple(mutation.start_pos), mutation.operator_name, item.job_id))
                    why = NOT_SAMPLED
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=why))
            order = seeded_order(in_scope, self.plan.seed, self.target.slug)
            mine = self.plan.in_shard(order)
            for job in set(order) - set(mine):
                db.set_result(job, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=OTHER_SHARD))
        return mine

    def data(self, equivalents: dict[tuple[str, str, str], str]) -> list[Mutant]:
        """Knock-out mutants of ``target.constant`` (scripts/mutation_data.py), run one by one."""
        from mutation_data import data_mutants

        target = self.target
        path = self.copy / target.module
        original = path.read_text(encoding="utf-8")
        lines = original.splitlines()
        with AST_LOCK:
            changes = list(data_mutants(original, target.constant or ""))
        in_scope = [c for c in changes if self.plan.lines is None or c.line in self.plan.lines]
        everything = seeded_order(
            ((c.line, c.column, c.operator, i) for i, c in enumerate(in_scope)), self.plan.seed, target.slug
        )
        order = self.plan.in_shard(everything)
        mutants = []
        try:
            for index in order:
                change = in_scope[index]
                operator = f"{change.operator}@{change.column}"
                mutant = Mutant(
                    target.module, change.line, operator, target.constant, lines[change.line - 1].strip(), ""
                )
                mutants.append(mutant)
                remaining = self.time_left()
                if remaining is not None and remaining <= 0:
                    mutant.outcome = "not sampled"
                    continue
                path.write_text(change.source, encoding="utf-8")
                try:
                    limit = self.timeout_s if remaining is None else min(self.timeout_s, remaining)
                    run = subprocess.run(
                        self.command,
                        cwd=self.copy,
                        env=self.env,
                        timeout=limit,
                        capture_output=True,
                        text=True,
                    )
                    killed, output = run.returncode != 0, run.stdout
                except subprocess.TimeoutExpired:
                    if remaining is not None and remaining < self.timeout_s:
                        mutant.outcome = "over the cap"
                        continue
                    killed, output = True, "timeout"
                survived = "equivalent" if key(mutant) in equivalents else "survived"
                mutant.outcome = "killed" if killed else survived
                mutant.killed_by = failing_test(output) if killed else ""
        finally:
            path.write_text(original, encoding="utf-8")
        mutants += [
            Mutant(
                target.module,
                c.line,
                f"{c.operator}@{c.column}",
                target.constant,
                "",
                "skipped",
                why="not on a changed line",
            )
            for c in changes
            if c not in in_scope
        ]
        mutants += [
            Mutant(
                target.module,
                in_scope[i].line,
                f"{in_scope[i].operator}@{in_scope[i].column}",
                target.constant,
                "",
                "skipped",
                why=OTHER_SHARD,
            )
            for i in set(everything) - set(order)
        ]
        return sorted(mutants, key=lambda m: (m.line, m.operator))


def cosmic_ray_config(target: Any, command: list[str], timeout: float) -> str:
    excluded = ", ".join(f"'{pattern}'" for pattern in EXCLUDED_OPERATORS)
    test_command = " ".join(command).replace("\\", "\\\\").replace('"', '\\"')
    return (
        "[cosmic-ray]\n"
        f'module-path = "{target.module}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f'test-command = "{test_command}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = [{excluded}]\n"
    )


def read_session(
    session: Path, copy: Path, equivalents: dict[tuple[str, str, str], str], functions: tuple[str, ...] = ()
) -> list[Mutant]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    lines_of: dict[str, list[str]] = {}
    spans_of: dict[str, list] = {}
    mutants = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        finished = [(item, result) for item, result in db.completed_work_items]
        finished += [(item, None) for item in db.pending_work_items]  # released, but the cap came first
        for item, result in finished:
            mutation = item.mutations[0]
            module = str(mutation.module_path)
            lines = lines_of.setdefault(module, (copy / module).read_text(encoding="utf-8").splitlines())
            line = mutation.start_pos[0]
            operator = (
                f"{mutation.operator_name}@{mutation.start_pos[1]}"  # @column: tells apart twins on a line
            )
            mutant = Mutant(module, line, operator, mutation.definition_name, lines[line - 1].strip(), "")
            spans = spans_of.setdefault(module, annotation_spans(copy / module))
            out_of_scope = functions and mutation.definition_name not in functions
            if result is None:
                mutant.outcome = "over the cap"
            elif result.worker_outcome == WorkerOutcome.SKIPPED and result.output == "not sampled":
                mutant.outcome = "not sampled"
            elif (
                result.worker_outcome == WorkerOutcome.SKIPPED
                or out_of_scope
                or in_spans(tuple(mutation.start_pos), spans)
            ):
                mutant.outcome = "skipped"
                mutant.why = (
                    (result.output or "")
                    if result.worker_outcome == WorkerOutcome.SKIPPED
                    else "out of scope"
                )
            elif result.test_outcome == TestOutcome.SURVIVED:
                mutant.outcome = "equivalent" if key(mutant) in equivalents else "survived"
                mutant.diff = result.diff or ""
            elif UNREACHABLE in (result.output or ""):
                mutant.outcome = "not run"  # the fork server was gone: no test ran
            else:
                mutant.outcome = "killed"  # tests failed, hung past the timeout, or the mutant could not load
                mutant.killed_by = failing_test(result.output or "")
            mutants.append(mutant)
    return sorted(mutants, key=lambda m: (m.line, m.operator))
