"""Mutation testing of the fail-closed core with cosmic-ray: does a plausible bug make a test fail?

Each module in MODULES is mutated by cosmic-ray (one small change per mutant: ``<`` -> ``<=``,
``and`` -> ``or``, a number, ``not`` added, ...) in its own copy of the working tree, and the few test
files that cover it are run against every mutant. A mutant is *killed* when those tests fail (or hang
past the module's timeout) and *survives* when they pass. Survivors are either a missing test or an
equivalent mutant (the change does not alter behaviour); the latter are listed, each with why, in
tests/mutation/equivalent.txt, and are left out of the kill rate.

Usage: ``scripts/mutation.sh [--jobs N] [--min-rate 90] [MODULE-SUBSTRING ...]``. Prints the kill rate
per module and every surviving mutant; exits 1 when a module is below ``--min-rate``.
See docs/mutation.md.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))  # mutation_data.py beside this file
EQUIVALENT_FILE = REPO / "tests" / "mutation" / "equivalent.txt"
FORKSERVER = REPO / "scripts" / "mutation_forkserver.py"
UNREACHABLE = "fork server unreachable"  # what its client prints when no test could run


@dataclass(frozen=True)
class Target:
    """A module to mutate, optionally only inside some functions, and the tests that cover it."""

    module: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # empty: every mutant in the module
    constant: str | None = None  # mutate this module-level constant's entries instead (mutation_data.py)

    @property
    def name(self) -> str:
        scope = (self.constant,) if self.constant else self.functions
        return self.module + (f" ({', '.join(scope)})" if scope else "")


# One line per module: the module, the few test files that cover it, and, where only part of a module
# is in scope, the functions to mutate (or the constant, for the forcing sets). pytest -x stops at the
# first failure, so quick files that kill most mutants go first; slow ones (hypothesis, real workers) last.
MODULES = (
    Target("topo_gate/profile/digest.py", ("tests/profile/test_schema_roundtrip.py", "tests/profile/test_reader_gate.py", "tests/profile/test_fail_closed.py")),
    Target("topo_gate/profile/validate.py", ("tests/profile/test_schema_roundtrip.py", "tests/profile/test_malformed.py", "tests/profile/test_fail_closed.py")),
    Target("topo_gate/profile/reader.py", ("tests/profile/test_reader_gate.py", "tests/profile/test_fail_closed.py")),
    Target("topo_gate/profile/semantics.py", ("tests/profile/test_malformed.py", "tests/profile/test_fail_closed.py", "tests/profile/test_mutations.py")),
    *(Target(f"topo_gate/decide/{name}.py", ("tests/decide/test_decide_rules.py", "tests/decide/test_decide_cases.py", "tests/decide/test_decide_properties.py")) for name in ("verdicts", "ladder", "words", "runs")),
    Target("topo_gate/trials/safety.py", ("tests/trials/test_worker_entry.py", "tests/trials/test_safety_env.py")),
    Target("topo_gate/trials/worker/checks.py", ("tests/trials/test_checks.py",)),
    Target("topo_gate/trials/runner.py", ("tests/trials/test_runner_gloo.py::test_hang_is_killed_within_its_bound_and_the_others_still_measured", "tests/trials/test_runner_gloo.py::test_crash_is_reported_with_its_exit_status", "tests/trials/test_watchdog.py"), ("_watch", "bound_s", "_timeout_fault")),
    Target("topo_gate/launchers/sglang.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_forced_nccl.py"), constant="FORCE_NCCL"),
    Target("topo_gate/launchers/vllm.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_forced_nccl.py"), constant="FORCE_NCCL"),
    Target("topo_gate/launchers/trtllm.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_forced_nccl.py"), constant="FORCE_NCCL"),
    Target("topo_gate/launchers/common.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_plan_cases.py", "tests/launchers/test_forced_nccl.py", "tests/launchers/test_common.py")),
    # The route model: the check every plan must pass, and FlashInfer's one-/two-shot choice.
    Target("topo_gate/launchers/routes/check.py", ("tests/launchers/test_route_check.py", "tests/launchers/test_routes.py", "tests/launchers/test_plans_follow_routes.py")),
    Target("topo_gate/launchers/routes/flashinfer.py", ("tests/launchers/test_route_check.py", "tests/launchers/test_routes.py")),
)  # fmt: skip

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


@dataclass
class Mutant:
    module: str
    line: int
    operator: str
    function: str | None
    source: str
    outcome: str  # "killed" | "survived" | "equivalent" | "skipped" | "not run"
    diff: str = ""
    killed_by: str = ""  # the first failing test's node id, from pytest's summary

    def where(self) -> str:
        return f"{self.module}:{self.line} {self.operator} in {self.function or '<module>'}: {self.source}"


@dataclass
class ModuleResult:
    target: Target
    mutants: list[Mutant]
    seconds: float
    error: str | None = None

    def count(self, outcome: str) -> int:
        return sum(1 for m in self.mutants if m.outcome == outcome)

    @property
    def rate(self) -> float | None:
        judged = self.count("killed") + self.count("survived")
        return None if judged == 0 else 100.0 * self.count("killed") / judged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="modules mutated at once (default 2)")
    parser.add_argument("--min-rate", type=float, default=90.0, help="fail below this kill rate %%")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies (path printed)")
    parser.add_argument("--sessions", type=Path, help="report on the sessions kept in this folder (--keep)")
    parser.add_argument(
        "--survivors",
        type=Path,
        help="in the copies kept in this folder, run the survivors against today's tests",
    )
    parser.add_argument("only", nargs="*", help="run only modules whose path contains one of these")
    args = parser.parse_args(argv)
    targets = [t for t in MODULES if not args.only or any(s in t.module for s in args.only)]
    if not targets:
        parser.error(f"no module matches {args.only}")
    equivalents = read_equivalents(EQUIVALENT_FILE)
    if args.sessions is not None:
        results = [report_kept(t, args.sessions / slug(t.module), equivalents) for t in targets]
        report(results, 0.0, args.jobs)
        check_equivalents(results, equivalents)
        return 0
    if args.survivors is not None:
        scratch = args.survivors
        targets = [t for t in targets if reopen_survivors(scratch / slug(t.module), equivalents)]
        args.keep = True
    else:
        scratch = Path(tempfile.mkdtemp(prefix="topo-gate-mutation-"))
    started = time.monotonic()
    for target in targets:  # every copy before any run: later edits to the tree do not leak into this run
        copy_tree(scratch / slug(target.module), keep=target.module if args.survivors is not None else None)
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda t: run_target(t, scratch / slug(t.module), equivalents), targets))
    finally:
        if args.keep:
            print(f"scratch copies kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    report(results, time.monotonic() - started, args.jobs)
    check_equivalents(results, equivalents)
    failed = [r for r in results if r.error or r.rate is None or r.rate < args.min_rate]
    return 1 if failed else 0


def check_equivalents(results: list[ModuleResult], equivalents: dict[tuple[str, str, str], str]) -> None:
    """Say where equivalent.txt is out of date: an entry a test now kills, or one that matches nothing."""
    for mutant in (m for r in results for m in r.mutants if m.outcome == "killed" and key(m) in equivalents):
        print(f"note: listed as equivalent but a test kills it: {mutant.where()}")
    unused = sorted(set(equivalents) - {key(m) for r in results for m in r.mutants})
    for entry in unused:
        if any(entry[0] == r.target.module for r in results):
            print(f"note: equivalent.txt entry matches no mutant any more: {' | '.join(entry)}")


def slug(module: str) -> str:
    return module.replace("/", "_").removesuffix(".py")


def read_equivalents(path: Path) -> dict[tuple[str, str, str], str]:
    """``module | operator | source line (stripped) | why`` per line; ``#`` starts a comment."""
    found = {}
    if not path.exists():
        return found
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [part.strip() for part in raw.split(" | ")]
        if len(parts) < 4 or not parts[-1]:
            raise SystemExit(f"{path}:{number}: want 'module | operator | source line | why', got {raw!r}")
        # The source line may hold " | " itself (``str | None``); the reason must not.
        found[(parts[0], parts[1], " | ".join(parts[2:-1]))] = parts[-1]
    return found


def key(mutant: Mutant) -> tuple[str, str, str]:
    return (mutant.module, mutant.operator, mutant.source)


def reopen_survivors(copy: Path, equivalents: dict[tuple[str, str, str], str]) -> bool:
    """Mark the kept session's surviving mutants (not those listed as equivalent) and the ones that
    never ran as not run yet; the module itself must be unchanged."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    session = copy / "session.sqlite"
    if not session.exists():
        return False
    reopen = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            mutation = item.mutations[0]
            lines = (copy / mutation.module_path).read_text(encoding="utf-8").splitlines()
            operator = f"{mutation.operator_name}@{mutation.start_pos[1]}"
            equivalent = (
                str(mutation.module_path),
                operator,
                lines[mutation.start_pos[0] - 1].strip(),
            ) in equivalents
            survived = result.test_outcome == TestOutcome.SURVIVED and not equivalent
            if survived or UNREACHABLE in (result.output or ""):
                reopen.append(item.job_id)
    import sqlite3

    with sqlite3.connect(session) as db:
        db.executemany("DELETE FROM work_results WHERE job_id = ?", [(job,) for job in reopen])
    return True


def copy_tree(destination: Path, keep: str | None = None) -> None:
    """The working tree as git sees it (tracked and untracked-not-ignored files): no venv, no caches.
    ``keep``: refresh an existing copy but this file, which a kept session's mutants were made from
    (it must not have changed since)."""
    destination.mkdir(parents=True, exist_ok=keep is not None)
    if keep is not None and (destination / keep).read_bytes() != (REPO / keep).read_bytes():
        raise SystemExit(f"{keep} changed since {destination} was mutated: run it afresh")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (os.fsdecode(entry) for entry in listed)):
        if name == keep:
            continue
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def run_target(target: Target, copy: Path, equivalents: dict[tuple[str, str, str], str]) -> ModuleResult:
    started = time.monotonic()
    tests = [test for test in target.tests if (copy / test.split("::")[0]).exists()]
    if not tests:
        return ModuleResult(target, [], 0.0, error=f"none of its test files exist: {list(target.tests)}")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", "-o", "addopts="]
    command += ["--timeout", "300", *tests]
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    # The tests must pass on the unmutated copy, or every mutant would count as killed.
    baseline_started = time.monotonic()
    baseline = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)
    baseline_s = time.monotonic() - baseline_started
    if baseline.returncode != 0:
        tail = "\n".join((baseline.stdout + baseline.stderr).splitlines()[-15:])
        return ModuleResult(target, [], baseline_s, error=f"tests fail without any mutant:\n{tail}")
    timeout_s = max(30.0, 5 * baseline_s)  # a mutant that makes the tests hang is killed
    socket_path = copy / "pytest.sock"
    socket_path.unlink(missing_ok=True)  # a kept copy's old socket
    server = subprocess.Popen(
        [sys.executable, str(FORKSERVER), "serve", str(socket_path), f"{timeout_s:.0f}"], cwd=copy, env=env
    )
    try:
        while not socket_path.exists():
            if server.poll() is not None:
                return ModuleResult(target, [], baseline_s, error="the pytest fork server did not start")
            time.sleep(0.05)
        warm = [sys.executable, str(FORKSERVER), "run", str(socket_path), *command[3:]]
        # The same baseline through the server: a server that cannot run the tests would kill every mutant.
        if subprocess.run(warm, cwd=copy, env=env, capture_output=True).returncode != 0:
            return ModuleResult(target, [], baseline_s, error="the tests fail through the pytest fork server")
        if target.constant is not None:
            return mutate_data(target, copy, env, warm, timeout_s + 30, equivalents, started)
        return mutate(target, copy, env, warm, timeout_s + 30, equivalents, started)
    finally:
        server.kill()
        server.wait()


def mutate(
    target: Target,
    copy: Path,
    env: dict[str, str],
    command: list[str],
    timeout_s: float,
    equivalents: dict[tuple[str, str, str], str],
    started: float,
) -> ModuleResult:
    config = copy / "cosmic-ray.toml"
    config.write_text(cosmic_ray_config(target, command, timeout=timeout_s), encoding="utf-8")
    session = copy / "session.sqlite"
    cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
    if not session.exists():  # else: a kept session whose survivors are to be run again
        subprocess.run([*cosmic, "init", str(config), str(session)], cwd=copy, env=env, check=True)
        subprocess.run(
            [sys.executable, "-m", "cosmic_ray.tools.filters.operators_filter", str(session), str(config)],
            cwd=copy,
            env=env,
            check=True,
        )
        skip_outside(session, target.functions, annotation_spans(copy / target.module))
    subprocess.run([*cosmic, "exec", str(config), str(session)], cwd=copy, env=env, check=True)
    mutants = read_session(session, copy, equivalents, target.functions)
    return ModuleResult(target, mutants, time.monotonic() - started)


def mutate_data(
    target: Target,
    copy: Path,
    env: dict[str, str],
    command: list[str],
    timeout_s: float,
    equivalents: dict[tuple[str, str, str], str],
    started: float,
) -> ModuleResult:
    """Knock-out mutants of ``target.constant`` (scripts/mutation_data.py), run one by one."""
    from mutation_data import data_mutants

    path = copy / target.module
    original = path.read_text(encoding="utf-8")
    lines = original.splitlines()
    mutants = []
    try:
        for change in data_mutants(original, target.constant):
            path.write_text(change.source, encoding="utf-8")
            try:
                run = subprocess.run(
                    command, cwd=copy, env=env, timeout=timeout_s, capture_output=True, text=True
                )
                killed, output = run.returncode != 0, run.stdout
            except subprocess.TimeoutExpired:
                killed, output = True, "timeout"
            operator = f"{change.operator}@{change.column}"
            mutant = Mutant(
                target.module, change.line, operator, target.constant, lines[change.line - 1].strip(), ""
            )
            survived = "equivalent" if key(mutant) in equivalents else "survived"
            mutant.outcome = "killed" if killed else survived
            mutant.killed_by = failing_test(output) if killed else ""
            mutants.append(mutant)
    finally:
        path.write_text(original, encoding="utf-8")
    return ModuleResult(target, mutants, time.monotonic() - started)


def cosmic_ray_config(target: Target, command: list[str], timeout: float) -> str:
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


def annotation_spans(module: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the module's annotations are, if it never evaluates them (``from __future__ import
    annotations``): ``str | None`` -> ``str & None`` there changes nothing, so it is no mutant."""
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
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [arguments.vararg, arguments.kwarg]
            annotations = [a.annotation for a in every if a is not None and a.annotation is not None]
            annotations += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        found += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in annotations]
    return found


def in_spans(position: tuple[int, int], spans: list[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    return any(start <= tuple(position) < end for start, end in spans)


def skip_outside(session: Path, functions: tuple[str, ...], annotations: list) -> None:
    """Mark as skipped every mutant outside ``functions`` (when given; cosmic-ray records each one's
    definition) and every mutant of an annotation that is never evaluated."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            mutation = item.mutations[0]
            if functions and mutation.definition_name not in functions:
                why = "out of scope"
            elif in_spans(mutation.start_pos, annotations):
                why = "annotation (never evaluated)"
            else:
                continue
            db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=why))


def report_kept(target: Target, folder: Path, equivalents: dict[tuple[str, str, str], str]) -> ModuleResult:
    """A kept session, read against this tree's sources (which must be the ones it mutated)."""
    session = folder / "session.sqlite"
    if not session.exists():
        return ModuleResult(target, [], 0.0, error=f"no session at {session}")
    return ModuleResult(target, read_session(session, REPO, equivalents, target.functions), 0.0)


def read_session(
    session: Path, copy: Path, equivalents: dict[tuple[str, str, str], str], functions: tuple[str, ...] = ()
) -> list[Mutant]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    lines_of: dict[str, list[str]] = {}
    spans_of: dict[str, list] = {}
    mutants = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
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
            if (
                result.worker_outcome == WorkerOutcome.SKIPPED
                or out_of_scope
                or in_spans(mutation.start_pos, spans)
            ):
                mutant.outcome = "skipped"
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


def failing_test(output: str) -> str:
    """The node id in pytest's ``FAILED id - ...`` / ``ERROR id`` summary line, or what happened."""
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" ", 1)[1].split(" - ", 1)[0]
    return "timeout" if "timeout" in output else "no test failure named"


def report(results: list[ModuleResult], seconds: float, jobs: int) -> None:
    for result in results:
        survivors = [m for m in result.mutants if m.outcome == "survived"]
        by_file = Counter(m.killed_by.split("::")[0] for m in result.mutants if m.outcome == "killed")
        if by_file:
            tally = ", ".join(f"{name} {count}" for name, count in by_file.most_common())
            print(f"\n== {result.target.name}: killed by {tally}")
        if result.count("not run"):
            result.error = f"{result.count('not run')} mutant(s) not run: the fork server was gone (rerun with --survivors)"
        if result.error:
            print(f"\n== {result.target.name}: ERROR {result.error}")
        elif survivors:
            print(f"\n== {result.target.name}: {len(survivors)} surviving mutant(s)")
            for mutant in survivors:
                print(f"  {mutant.where()}")
    print(f"\n{'module':<62} {'mutants':>7} {'killed':>6} {'surv.':>5} {'equiv.':>6} {'rate':>6} {'time':>6}")
    for result in results:
        rate = "-" if result.rate is None else f"{result.rate:.1f}%"
        judged = result.count("killed") + result.count("survived") + result.count("equivalent")
        print(
            f"{result.target.name:<62} {judged:>7} {result.count('killed'):>6} {result.count('survived'):>5} "
            f"{result.count('equivalent'):>6} {rate:>6} {result.seconds:>5.0f}s"
        )
    print(f"total wall time {seconds:.0f} s with --jobs {jobs}")


if __name__ == "__main__":
    sys.exit(main())
