"""Mutation testing of the fail-closed core with cosmic-ray: does a plausible bug make a test fail?

Each module in MODULES is mutated by cosmic-ray (one small change per mutant: ``<`` -> ``<=``,
``and`` -> ``or``, a number, ``not`` added, ...) in its own copy of the working tree, and the few test
files that cover it are run against every mutant. A mutant is *killed* when those tests fail (or hang
past the module's timeout) and *survives* when they pass. Survivors are either a missing test or an
equivalent mutant (the change does not alter behaviour); the latter are listed, each with why, in
tests/mutation/equivalent.txt, and are left out of the kill rate.

Usage: ``scripts/mutation.sh [--jobs N] [--min-rate 90] [MODULE-SUBSTRING ...]``: every mutant of the
named modules (all without a name). ``--changed [--time-cap S] [--seed N]`` (CI): only the modules,
and lines, changed since tests/mutation/base-commit, within a wall-clock cap (scripts/mutation_scope.py).
Prints the kill rate per module and every surviving mutant; exits 1 when a module is below
``--min-rate``. ``--results RUN.json`` saves the run for scripts/mutation_report.py. See docs/mutation.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))  # the helpers beside this file
from mutation_forkserver import TIMEOUT_OPTION  # noqa: E402
from mutation_report import (  # noqa: E402
    NOT_STARTED,
    ModuleResult,
    check_equivalents,
    read_equivalents,
    report,
    write_results,
)
from mutation_run import NOT_SAMPLED, UNREACHABLE, Plan, Run, read_session, reopen, scope_words  # noqa: E402
from mutation_scope import Budget, Selection, read_base_commit, read_module_bases, select  # noqa: E402

EQUIVALENT_FILE = REPO / "tests" / "mutation" / "equivalent.txt"
FORKSERVER = REPO / "scripts" / "mutation_forkserver.py"
BASELINE_LIMIT_S = (
    1800  # the clean run of a module's tests through the fork server (pytest's own: 300 s a test)
)
__all__ = ["MODULES", "EQUIVALENT_FILE", "Target", "main", "read_equivalents"]


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

    @property
    def slug(self) -> str:
        """The scratch copy's folder name: one per target (a module may have two, by function)."""
        scope = (self.constant,) if self.constant else self.functions
        return "-".join((self.module.replace("/", "_").removesuffix(".py"), *scope))


# A Unix socket's path holds at most 107 bytes on Linux (sun_path); past it the fork server cannot bind.
SOCKET_PATH_MAX = 100

# One line per module: the module, the few test files that cover it, and, where only part of a module
# is in scope, the functions to mutate (or the constant, for the forcing sets). pytest -x stops at the
# first failure, so quick files that kill most mutants go first; slow ones (hypothesis, real workers) last.
MODULES = (
    Target("topo_gate/profile/digest.py", ("tests/profile/test_schema_roundtrip.py", "tests/profile/test_reader_gate.py", "tests/profile/test_fail_closed.py")),
    Target("topo_gate/profile/validate.py", ("tests/profile/test_schema_roundtrip.py", "tests/profile/test_malformed.py", "tests/profile/test_fail_closed.py", "tests/profile/test_semantic_boundaries.py")),
    Target("topo_gate/profile/reader.py", ("tests/profile/test_reader_gate.py", "tests/profile/test_fail_closed.py", "tests/profile/test_reader_hostile_arguments.py", "tests/profile/test_reader_reasons.py", "tests/profile/test_reader_admission.py", "tests/profile/test_reader_admission_edges.py", "tests/profile/test_profile_set.py")),
    Target("topo_gate/profile/semantics.py", ("tests/profile/test_malformed.py", "tests/profile/test_fail_closed.py", "tests/profile/test_semantic_boundaries.py", "tests/profile/test_price_table_claims.py", "tests/profile/test_mutations.py")),
    *(Target(f"topo_gate/decide/{name}.py", ("tests/decide/test_decide_rules.py", "tests/decide/test_decide_cases.py", "tests/decide/test_decide_transitions_fusion_failures.py", "tests/decide/test_decide_in_context_confirmation.py", "tests/decide/test_decide_bar_boundary.py", "tests/decide/test_decide_size_verdicts.py", "tests/decide/test_decide_properties.py")) for name in ("verdicts", "ladder", "words", "runs")),
    # Decide's bar, which the trial worker applies too: the margin, the step's calls, a transition's cost.
    Target("topo_gate/evidence/bar.py", ("tests/decide/test_decide_transitions_fusion_failures.py", "tests/decide/test_prices.py", "tests/decide/test_decide_rules.py", "tests/decide/test_decide_bar_boundary.py", "tests/decide/test_decide_size_verdicts.py", "tests/trials/test_transition_charge.py")),
    Target("topo_gate/trials/safety.py", ("tests/trials/test_worker_entry.py", "tests/trials/test_safety_env.py")),
    Target("topo_gate/trials/worker/checks.py", ("tests/trials/test_checks.py",)),
    Target("topo_gate/trials/runner.py", ("tests/trials/test_runner_gloo.py::test_hang_is_killed_within_its_bound_and_the_others_still_measured", "tests/trials/test_runner_gloo.py::test_crash_is_reported_with_its_exit_status", "tests/trials/test_watchdog.py"), ("_watch", "bound_s", "_timeout_fault")),
    Target("topo_gate/launchers/sglang.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_forced_nccl.py"), constant="FORCE_NCCL"),
    Target("topo_gate/launchers/vllm.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_forced_nccl.py"), constant="FORCE_NCCL"),
    Target("topo_gate/launchers/trtllm.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_forced_nccl.py"), constant="FORCE_NCCL"),
    *(Target(f"topo_gate/launchers/{name}.py", ("tests/launchers/test_fallback.py", "tests/launchers/test_forced_nccl.py", "tests/launchers/test_follow.py", "tests/launchers/test_follow_reading.py", "tests/launchers/test_planning.py", "tests/launchers/test_model_shape.py", "tests/launchers/test_releases.py", "tests/launchers/test_read_once.py", "tests/launchers/test_request_edges.py")) for name in ("plan/request", "plan/flow")),
    # The route model: FlashInfer's one-/two-shot choice.
    Target("topo_gate/launchers/routes/flashinfer.py", ("tests/launchers/test_routes.py", "tests/launchers/test_route_defaults.py")),
    # What a launcher trusts at start-up besides the profile: the node's identity and its software.
    Target("topo_gate/topology/fingerprint.py", ("tests/topology/test_fingerprint_fields.py", "tests/topology/test_fingerprint.py")),
    Target("topo_gate/profile/drift.py", ("tests/profile/test_drift_readers.py", "tests/profile/test_reader_gate.py")),
    # The plugins: a plan's flags onto the launcher's parsed configuration, and the line saying so.
    Target("topo_gate/plugins/__init__.py", ("tests/plugins/test_apply_on_stand_ins.py", "tests/plugins/test_plugin_core.py"), ("line", "export_env", "record", "apply_flags")),
    Target("topo_gate/plugins/vllm.py", ("tests/plugins/test_apply_on_stand_ins.py",), ("_apply", "_apply_pass_config")),
    # The guarded writer and reader, and the evidence checks every replay passes.
    Target("topo_gate/_atomic.py", ("tests/test_output_symlinks.py", "tests/test_output_is_input.py", "tests/test_outputs.py", "tests/test_atomic_writer.py")),
    Target("topo_gate/_units.py", ("tests/test_units.py", "tests/test_one_spelling_of_numbers.py", "tests/decide/test_decide_rules.py")),
    Target("topo_gate/_inputs.py", ("tests/test_input_size_cap.py", "tests/trials/test_evidence.py", "tests/profile/test_malformed.py", "tests/test_json_input_limits.py", "tests/test_fuzz_inputs.py")),
    Target("topo_gate/evidence/check.py", ("tests/decide/test_evidence_samples_refused.py", "tests/trials/test_evidence.py", "tests/trials/test_evidence_session_and_after_sizes.py", "tests/trials/test_evidence_bounds.py", "tests/trials/test_evidence_preflight_and_call_settings.py", "tests/test_fuzz_inputs.py")),
    # The planner: the step's price, the workload's weights, the knob search and its words.
    Target("topo_gate/launchers/plan/costmodel.py", ("tests/launchers/test_costmodel.py", "tests/launchers/test_costmodel_transitions_and_constraint.py", "tests/launchers/test_costmodel_step_sizes.py", "tests/launchers/test_costmodel_embedding_fused_step.py", "tests/launchers/test_costmodel_transition_charges.py", "tests/launchers/test_costmodel_step_check_words.py", "tests/launchers/test_workload.py", "tests/launchers/test_planning.py", "tests/launchers/test_step_rule.py")),
    Target("topo_gate/launchers/plan/pricing.py", ("tests/launchers/test_pricing.py", "tests/launchers/test_costmodel.py", "tests/launchers/test_costmodel_transitions_and_constraint.py", "tests/launchers/test_step_rule.py", "tests/launchers/test_planning.py")),
    Target("topo_gate/launchers/plan/workload.py", ("tests/launchers/test_workload_keys.py", "tests/launchers/test_workload_bounds.py", "tests/launchers/test_workload.py", "tests/launchers/test_costmodel.py", "tests/launchers/test_costmodel_transitions_and_constraint.py", "tests/launchers/test_planning.py", "tests/launchers/test_step_rule.py")),
    Target("topo_gate/launchers/plan/choice.py", ("tests/launchers/test_tie_rule.py", "tests/launchers/test_planning_rules.py", "tests/launchers/test_planning.py", "tests/launchers/test_costmodel.py", "tests/launchers/test_costmodel_transitions_and_constraint.py")),
    # What the launchers will do on this node, and why a default path is unmeasured, with its fix.
    Target("topo_gate/launchers/outlook.py", ("tests/launchers/test_outlook_parts.py", "tests/launchers/test_outlook.py", "tests/launchers/test_outlook_fix_flags.py", "tests/report/test_outlook_headings.py", "tests/report/test_outlook_render.py", "tests/report/test_readme_outlook.py")),
    Target("topo_gate/launchers/plan/unmeasured.py", ("tests/launchers/test_unmeasured_fixes.py", "tests/launchers/test_explain.py", "tests/launchers/test_outlook.py", "tests/probe/test_preflight.py")),
    # The probe's preflight: what the probe will and will not measure on this node, before any trial.
    Target("topo_gate/probe/preflight.py", ("tests/probe/test_preflight.py", "tests/probe/test_preflight_ranges.py", "tests/probe/test_preflight_cli.py", "tests/probe/test_probe_wiring.py")),
    Target("topo_gate/launchers/plan/explain.py", ("tests/launchers/test_explain.py", "tests/launchers/test_step_rule.py", "tests/launchers/test_recommend_explain_words.py", "tests/launchers/test_follow_reading.py", "tests/launchers/test_outlook.py", "tests/launchers/test_recommend_cli.py")),
    Target("topo_gate/launchers/plan/explain_words.py", ("tests/launchers/test_explain_words.py", "tests/launchers/test_recommend_explain_words.py", "tests/launchers/test_follow_reading.py", "tests/launchers/test_outlook.py", "tests/launchers/test_recommend_cli.py")),
    # ab: the run order, the metric read from a run's output, the verdict, the sealed record and
    # what it hides.
    Target("topo_gate/ab/schedule.py", ("tests/ab/test_schedule.py", "tests/ab/test_record_semantics.py")),
    Target("topo_gate/ab/metrics.py", ("tests/ab/test_metrics.py", "tests/ab/test_regex_bounds.py", "tests/ab/test_metric_reading.py", "tests/ab/test_record_semantics.py")),
    Target("topo_gate/ab/verdict.py", ("tests/ab/test_verdict.py", "tests/ab/test_verdict_boundaries.py", "tests/ab/test_record_semantics.py")),
    Target("topo_gate/ab/outcome.py", ("tests/ab/test_redact_edges.py", "tests/ab/test_env_arms.py", "tests/ab/test_outcome.py", "tests/ab/test_record_semantics.py", "tests/ab/test_ab_cli.py")),
    Target("topo_gate/ab/redact.py", ("tests/ab/test_redact_edges.py", "tests/ab/test_redact_github_tokens.py", "tests/ab/test_redact_spellings.py", "tests/ab/test_redact.py", "tests/ab/test_redact_rules.py", "tests/ab/test_redact_corpus.py")),
    # The runner's multicast-off settings for every worker (the watchdog is the line above).
    Target("topo_gate/trials/runner.py", ("tests/safety/test_worker_environment.py",), ("worker_env",)),
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
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
    parser.add_argument(
        "--changed", action="store_true", help="only what changed since tests/mutation/base-commit"
    )
    parser.add_argument("--base", metavar="REV", help="with --changed: compare with REV instead")
    parser.add_argument("--time-cap", type=float, metavar="S", help="stop judging mutants after S seconds")
    parser.add_argument("--seed", type=int, default=0, help="order of the mutants run under --time-cap")
    parser.add_argument("--results", type=Path, metavar="RUN.json", help="save the run (mutation_report.py)")
    parser.add_argument(
        "--shard",
        type=shard_of,
        metavar="K/N",
        help="judge only the K-th of every N mutants (0 <= K < N) of each module; N runs, one per K, share "
        "a whole run (scripts/mutation_report.py --shards joins their results)",
    )
    parser.add_argument("only", nargs="*", help="run only modules whose path contains one of these")
    args = parser.parse_args(argv)
    targets = [t for t in MODULES if not args.only or any(s in t.module for s in args.only)]
    if not targets:
        parser.error(f"no module matches {args.only}")
    equivalents = read_equivalents(EQUIVALENT_FILE)
    if args.sessions is not None:
        results = [report_kept(t, args.sessions / t.slug, equivalents) for t in targets]
        report(results, 0.0, args.jobs)
        check_equivalents(results, equivalents)
        if args.results is not None:  # a kept run stopped before its end: what its sessions hold
            write_results(args.results, results, run_meta(argv, args, 0.0, os.getloadavg()[0], tree_state()))
        return 0
    selections: dict[str, Selection] = {}
    if args.changed or args.base:
        # --base REV compares every module with REV; without it each module with its own base.
        bases = {} if args.base else read_module_bases()
        chosen, notes = select(targets, args.base or read_base_commit(), module_bases=bases)
        print("\n".join(notes), flush=True)
        targets, selections = [t for t, _ in chosen], {t.slug: s for t, s in chosen}
        if not targets:
            return 0
    if args.survivors is not None:
        scratch = args.survivors
        targets = [t for t in targets if reopen_survivors(scratch / t.slug, equivalents)]
        args.keep = True
    else:
        scratch = Path(tempfile.mkdtemp(prefix="topo-gate-mutation-"))
    started, load_start = time.monotonic(), os.getloadavg()[0]
    tree = tree_state()  # what the copies below are made from (the tree may move on while they run)
    budget = Budget(args.time_cap, args.jobs, len(targets))  # the cap counts from here, copies included
    for target in targets:  # every copy before any run: later edits to the tree do not leak into this run
        copy_tree(scratch / target.slug, keep=target.module if args.survivors is not None else None)

    def run(target: Target) -> ModuleResult:
        return run_target(
            target,
            scratch / target.slug,
            equivalents,
            Plan(selections.get(target.slug), budget, args.seed, args.shard),
        )

    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(run, targets))
    finally:
        if args.keep:
            print(f"scratch copies kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.monotonic() - started
    report(results, seconds, args.jobs)
    # A shard judges a part of each module: a small module may have nothing in it.
    whole = not selections and args.time_cap is None and args.shard is None
    check_equivalents(results, equivalents, whole_modules=whole)
    if args.results is not None:
        write_results(args.results, results, run_meta(argv, args, seconds, load_start, tree))
    # A module with nothing judged fails a whole run (its tests could not run); under --changed or a
    # cap it may simply have had no mutant on the changed lines, or no time left.
    failed = [
        r
        for r in results
        if r.error or (r.rate is None and whole) or (r.rate is not None and r.rate < args.min_rate)
    ]
    for result in failed:
        rate = "nothing judged" if result.rate is None else f"{result.rate:.1f}% killed"
        print(f"FAILED: {result.target.name}: {result.error or rate} (minimum {args.min_rate:g}%)")
    return 1 if failed else 0


def shard_of(text: str) -> tuple[int, int]:
    """``K/N`` -> ``(k, n)``, refused unless 0 <= k < n."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want K/N, e.g. 0/4") from None
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"{text!r}: want 0 <= K < N")
    return k, n


def tree_state() -> dict[str, Any]:
    """The commit the working tree is on, whether it has uncommitted changes, and when this was read."""

    def git(*command: str) -> str:
        done = subprocess.run(["git", *command], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {
        "commit": git("rev-parse", "--short=12", "HEAD") or "unknown",
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def run_meta(
    argv: list[str], args: argparse.Namespace, seconds: float, load_start: float, tree: dict[str, Any]
) -> dict[str, Any]:
    """How the run was made, for its docs section; ``tree``: ``tree_state()`` when the copies were made."""
    import importlib.metadata

    return {
        # Paths as their last part only: the section goes into the docs, which name no path of a machine.
        "command": " ".join(
            ["scripts/mutation.sh", *(Path(a).name if os.path.isabs(a) else a for a in argv)]
        ),
        **tree,
        "cosmic_ray": importlib.metadata.version("cosmic-ray"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "seconds": round(seconds),
        "jobs": args.jobs,
        "time_cap": args.time_cap,
        "seed": args.seed,
        "shard": None if args.shard is None else f"{args.shard[0]}/{args.shard[1]}",
    }


def reopen_survivors(copy: Path, equivalents: dict[tuple[str, str, str], str]) -> bool:
    """Mark the kept session's surviving mutants (not those listed as equivalent) as not run yet, with
    the ones a time cap never released ("not sampled"); those it released but did not reach have no
    result and run anyway. The module itself must be unchanged."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    session = copy / "session.sqlite"
    if not session.exists():
        return False
    jobs = []
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
            held_back = result.worker_outcome == WorkerOutcome.SKIPPED and result.output == NOT_SAMPLED
            if survived or held_back or UNREACHABLE in (result.output or ""):
                jobs.append(item.job_id)
    reopen(session, jobs)
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


def run_target(
    target: Target, copy: Path, equivalents: dict[tuple[str, str, str], str], plan: Plan
) -> ModuleResult:
    try:
        return _run_target(target, copy, equivalents, plan)
    finally:
        plan.budget.finished()


def _run_target(
    target: Target, copy: Path, equivalents: dict[tuple[str, str, str], str], plan: Plan
) -> ModuleResult:
    started = time.monotonic()
    scope = "" if plan.selection is None else plan.selection.why
    tests = [test for test in target.tests if (copy / test.split("::")[0]).exists()]
    if not tests:
        return ModuleResult(target, [], 0.0, error=f"none of its test files exist: {list(target.tests)}")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", "-o", "addopts="]
    command += ["--timeout", "300", *tests]
    # The copy first, so its (mutated) topo_gate is the one imported; then whatever the environment
    # already puts on the path (an image may provide its packages that way).
    path = os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    share = plan.budget.share()  # this target's part of what is left of the cap, set now
    if share is not None and share <= 0:
        return ModuleResult(target, [], 0.0, scope="; ".join(filter(None, [scope, NOT_STARTED])))
    until = None if share is None else started + share
    socket_path = copy / "pytest.sock"
    if len(os.fsencode(socket_path)) > SOCKET_PATH_MAX:  # a long TMPDIR and a long target name
        digest = hashlib.sha256(os.fsencode(copy)).hexdigest()[:16]
        socket_path = Path("/tmp") / f"tg-mutation-{digest}.sock"  # TMPDIR itself may be the long part
    socket_path.unlink(missing_ok=True)  # a kept copy's old socket
    server = subprocess.Popen(
        [sys.executable, str(FORKSERVER), "serve", str(socket_path), str(BASELINE_LIMIT_S)], cwd=copy, env=env
    )
    try:
        while not socket_path.exists():
            if server.poll() is not None:
                return ModuleResult(target, [], 0.0, error="the pytest fork server did not start")
            time.sleep(0.05)
        warm = [sys.executable, str(FORKSERVER), "run", str(socket_path), *command[3:]]
        # The tests must pass on the unmutated copy, or every mutant would count as killed; run through
        # the server, as the mutants' are, this also times them as the mutants will be timed.
        baseline_started = time.monotonic()
        baseline = subprocess.run(warm, cwd=copy, env=env, capture_output=True, text=True)
        baseline_s = time.monotonic() - baseline_started
        if baseline.returncode != 0:
            tail = "\n".join(baseline.stdout.splitlines()[-15:])
            return ModuleResult(target, [], baseline_s, error=f"tests fail without any mutant:\n{tail}")
        timeout_s = max(30.0, 5 * baseline_s)  # a mutant that makes the tests hang is killed
        mutant_command = [*warm[:4], f"{TIMEOUT_OPTION}{timeout_s:.0f}", *warm[4:]]
        # baseline_s: a surviving mutant's cost; a killed one stops at its first failing test
        run = Run(target, copy, env, mutant_command, timeout_s + 30, plan, baseline_s, until)
        mutants = run.data(equivalents) if target.constant is not None else run.cosmic_ray(equivalents)
        return ModuleResult(target, mutants, time.monotonic() - started, scope=scope_words(scope, mutants))
    finally:
        server.terminate()  # it kills the test run in progress, with its process group, and exits
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def report_kept(target: Target, folder: Path, equivalents: dict[tuple[str, str, str], str]) -> ModuleResult:
    """A kept session, read against this tree's sources (which must be the ones it mutated)."""
    session = folder / "session.sqlite"
    if not session.exists():
        return ModuleResult(target, [], 0.0, error=f"no session at {session}")
    return ModuleResult(target, read_session(session, REPO, equivalents, target.functions), 0.0)


if __name__ == "__main__":
    sys.exit(main())
