"""Developer entry: run one trial session on one group and write evidence, without topology or a profile.

    python -m topo_gate.trials --tp 2 --device cpu --hidden 512 --max-tokens 64 \\
        --patterns allreduce,allreduce_rmsnorm --backends gloo,gloo_ring --rounds 15 \\
        --graph-calls 8 --out evidence.json

``topo-gate probe`` is the user-facing command; this entry exists to exercise the harness (tests, and
GPU bring-up before ``probe`` exists). Every pattern runs in the one worker session. Exit status follows docs/ARCHITECTURE.md: 0 all measured,
1 a backend gave a wrong answer, 2 usage, 6 nothing could be measured, 130 interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import socket
import statistics
import sys
import tempfile
from pathlib import Path

from topo_gate.evidence.document import evidence_from_results, trials_meta, write_evidence
from topo_gate.profile.digest import canonical_json
from topo_gate.profile.schema import DTYPE_BYTES, PATTERNS, PLAIN_PATTERN
from topo_gate.trials.backends import BACKENDS_BY_NAME, known_backend
from topo_gate.trials.plan import (
    SessionPlan,
    TrialPlan,
    default_backends,
    token_ladder,
)
from topo_gate.trials.results import PlanResult
from topo_gate.trials.runner import Progress, run_trial_session

EXIT_OK, EXIT_WRONG, EXIT_USAGE, EXIT_NOTHING_RAN, EXIT_INTERRUPTED = 0, 1, 2, 6, 130


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m topo_gate.trials",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tp", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--gpus", type=_csv, help="CUDA_VISIBLE_DEVICES entries (default 0..tp-1)")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=64, help="sizes: powers of two up to this")
    parser.add_argument("--dtype", choices=sorted(DTYPE_BYTES), default="bfloat16")
    parser.add_argument("--patterns", type=_csv, default=[PLAIN_PATTERN], help=f"of {','.join(PATTERNS)}")
    parser.add_argument("--backends", type=_csv, help="default: every backend of the pattern")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--graph-calls", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one step may take")
    parser.add_argument("--startup-timeout", type=float, default=120.0, help="seconds for start-up/setup")
    parser.add_argument("--allow-multicast", action="store_true", help="let workers create multicast objects")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="BACKEND=KIND",
        help="harness tests only (needs TOPO_GATE_ALLOW_FAULT_INJECTION=1): hang, hang-late, crash, wrong, "
        "wrong-odd, stale, transition or slow; _startup=infra|infra-once",
    )
    parser.add_argument("--workdir", type=Path, help="keep worker files here (default: a temp folder)")
    parser.add_argument("--out", type=Path, required=True, help="evidence JSON to write")
    return parser


def _plans(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[TrialPlan]:
    faults = dict(item.split("=", 1) for item in args.fault if "=" in item)
    if len(faults) != len(args.fault):
        parser.error("--fault takes BACKEND=KIND")
    unknown = [name for name in args.backends or () if not known_backend(name)]
    if unknown:
        parser.error(f"unknown backends {', '.join(unknown)} (known: {', '.join(sorted(BACKENDS_BY_NAME))})")
    try:
        return [
            TrialPlan(
                tp=args.tp,
                group=tuple(range(args.tp)),
                group_class=args.device,
                pattern=pattern,
                dtype=args.dtype,
                hidden=args.hidden,
                tokens=token_ladder(args.max_tokens),
                backends=args.backends or default_backends(pattern, args.device),
                graph_calls=args.graph_calls,
                rounds=args.rounds,
                warmup=args.warmup,
                allow_multicast=args.allow_multicast,
                seed=args.seed,
                faults=faults,
            )
            for pattern in args.patterns
        ]
    except ValueError as error:
        parser.error(str(error))


def _print_progress(event: Progress) -> None:
    if event.fault is not None:
        where = event.fault.pattern or "start-up"
        print(f"watchdog: {where}: {event.fault.status}: {event.fault.reason}", file=sys.stderr)


def _print_table(result: PlanResult) -> None:
    print(f"tp={result.plan.tp} {result.plan.pattern} ({result.attempts} attempt(s))")
    for cell in result.results:
        median = f"{statistics.median(cell['samples_us']):10.1f} us" if cell["samples_us"] else " " * 13
        print(
            f"  {cell['backend']:<20} {cell['nbytes']:>12} B {cell['status']:<11} {median}  {cell['reason'] or ''}"
        )
    for name, outcome in result.backends.items():
        if outcome.status not in ("ok",):
            print(f"  {name}: {outcome.status}: {outcome.reason}")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    plans = _plans(args, parser)
    if args.device == "cuda" and args.gpus is not None and len(args.gpus) != args.tp:
        parser.error(f"--gpus lists {len(args.gpus)} GPUs for --tp {args.tp}")
    cuda_devices = args.gpus or [str(index) for index in range(args.tp)]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="topo-gate-trials-"))
    try:
        results = run_trial_session(
            SessionPlan(tuple(plans)),
            device=args.device,
            cuda_devices=cuda_devices,
            timeout_s=args.timeout,
            workdir=workdir,
            on_progress=_print_progress,
            startup_timeout_s=args.startup_timeout,
        ).runs
    except KeyboardInterrupt:
        print("topo-gate trials: interrupted; no worker left running", file=sys.stderr)
        return EXIT_INTERRUPTED
    for result in results:
        _print_table(result)
    # Not a node fingerprint: a developer run reads no topology, so no reader can match it to a node.
    unread = {"developer run": args.device}
    node = {
        "fingerprint": "sha256:" + hashlib.sha256(canonical_json(unread).encode()).hexdigest(),
        "hardware": {"unknown": "developer run: the topology is not read (topo-gate probe reads it)"},
        "software": results[0].software,
        "provenance": {"hostname": socket.gethostname(), "python": platform.python_version()},
    }
    write_evidence(args.out, evidence_from_results(results, node, trials_meta(plans)))
    print(f"evidence: {args.out}  (worker files: {workdir})")
    if all(cell["status"] != "ok" for result in results for cell in result.results):
        print("topo-gate trials: no backend could be measured", file=sys.stderr)
        return EXIT_NOTHING_RAN
    if any(cell["status"] == "wrong" for result in results for cell in result.results):
        print("topo-gate trials: WRONG ANSWERS seen, see the table above", file=sys.stderr)
        return EXIT_WRONG
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
