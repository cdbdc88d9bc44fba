"""Decode-step benchmark: a launcher's default against the plan, in the served model's own step.

Plans are priced from isolated and per-layer graphs (``topo_gate.launchers.plan.costmodel``); this times
whole steps. For each launcher it asks the planner (``PLANNERS[launcher](PlanRequest(profile, tp=, model=, ...))``)
for the plan and the routes of the default and of the plan, then times, per case, a graph of
``--layers`` decoder layers whose norm sites call the backend each route names at that size:

    torchrun --nproc-per-node 2 benchmarks/decode_step.py --profile profiles/h200-x2/h7168-run1.yaml \\
        --launcher sglang,vllm,trtllm --model deepseek-v3 --nccl --out decode-step.json \\
        --env vllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm --env trtllm:TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1
    python benchmarks/decode_step.py --device cpu --hidden 64 --layers 2 --tokens 1,8,32 \\
        --prefill 32 --batch 1 --decodes 2 --nccl --out cpu.json \\
        --routes '{"default": {"allreduce_rmsnorm": [[null, "gloo"]]},
                   "plan": {"allreduce_rmsnorm": [[8, "gloo_ring+rmsnorm"], [null, "gloo"]]}}'

Without ``RANK`` in the environment (no torchrun) it starts ``--nproc`` ranks itself (``_ranks.py``).
``docs/trials.md`` "Decode-step benchmark" has the 2x H200 setup (the bundles, the install lines, the
three launchers' commands); ``scripts/gpu_validation.sh x2`` runs it.

Why each step is there:

- **The step is the served model's.** Per decoder layer two sites, each the row-parallel GEMM
  ``[tokens, hidden / tp] x [hidden / tp, hidden]`` writing the all-reduce's input, then the
  all-reduce and the residual add + RMSNorm (``_decode_graph``): the GEMM occupies the SMs and the
  memory the collective needs next and hides none of its launch, as in serving; every site has its own
  weight, so the GEMMs stream weights as a real step does. The vocab embedding's one plain all-reduce
  per step is left out: it is one call of 2 x layers + 1, and the estimate below leaves it out too.
- **The routes are the launcher's.** A site of ``tokens`` calls what ``Side.name_at`` names there: a
  fused kernel, ``<plain>+rmsnorm`` (the plain path, then the trials' one add+RMSNorm kernel,
  ``composite.py``), or ``nccl`` (NCCL, then that kernel). Each name is the trial backend that times
  exactly that launcher's call sequence, reached through its public ``Backend`` API; a name no trial
  times (multicast paths, TensorRT-LLM's autotuner, a model-dependent size) makes that case
  "unavailable" with the reason, never a substitute.
- **One instance per backend name**, shared by every site, case and configuration (``Kernels``), so a
  Lamport buffer sees the sequence of sizes a launcher's steps send it: ``--nccl`` adds NCCL (the
  device's baseline) at every size as a third configuration.
- **The mixed sequence** (``--prefill`` tokens, then ``--decodes`` steps of ``--batch``) pays the
  Lamport size transitions as serving pays them: the first decode step after a prefill chunk clears
  the chunk's slots; a steady size pays none.
- **Checked like the trials.** Once per configuration and case, the captured graph itself is replayed
  on integer inputs and weights that copy them (so every GEMM output is exact): the all-reduce's sum
  must match ``torch.distributed.all_reduce`` bit for bit and the norm a float32 reference within
  bf16 tolerance (``worker/checks.py``), voted across ranks. A wrong configuration is not timed.
- **Timed like the trials** (``worker/timing.py``): warm-up, then ``--steps-per-replay`` K passes of
  the case in one CUDA graph (CPU: back to back), pre-rolled by one replay of the same graph (the
  state a steady run leaves), ranks aligned before the start event; per round the slowest rank's time
  per pass; ``--rounds`` (>= 15) rounds, each visiting every case with the configurations' order
  rotated, so drift hits all alike. NCCL measures with ``NCCL_GRAPH_MIXING_SUPPORT=0`` as the trials
  do (``trials/safety.py`` says why), unless the caller sets it.
- **Compared as the planner prices.** Per case: medians with their 95% CIs, each configuration over
  the default as a ratio of medians with a paired bootstrap CI (``evidence.stats``); the planner's
  estimate for the same pass (``costmodel.price_at`` per step, 2 x layers sites at the path's median
  plus each Lamport buffer's transition after the message before it; the default optimistic, a changed
  path pessimistic, as ``costmodel`` does); the measured saving (default minus plan, its CI from the
  ratio's) against the estimated one: within 30% or not, and whether the plan is slower beyond noise.
  The planner's own workload total (``explain.totals``) is printed under each table.
- **Safe on shared machines.** ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
  ``NVSHMEM_DISABLE_NVLS=1`` are set in every process before torch is imported; a caller's other value
  is refused unless ``--allow-multicast``; the trial backends never call FlashInfer with "auto" or
  "mnnvl" and multicast backends are refused without the flag.

``--out FILE``: every per-round sample and the summaries as JSON (format ``topo-gate/decode-step/v1``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _decode_cases import CONFIGS, DEFAULT_TOKENS, RoutesError, make_cases, parse_routes  # noqa: E402

from topo_gate.trials.safety import MEASUREMENT_ENV, SAFETY_ENV  # noqa: E402

LAUNCHERS = ("sglang", "vllm", "trtllm")
MIN_ROUNDS = 15


def enforce_safety(environ: MutableMapping[str, str], *, allow_multicast: bool) -> str | None:
    """Set the safety variables where unset, and the trials' measurement settings where the caller
    left them; the reason to refuse when the caller set a safety variable otherwise (None: go)."""
    if allow_multicast:
        return None
    overridden = [f"{k}={environ[k]}" for k, v in SAFETY_ENV.items() if environ.get(k, v) != v]
    if overridden:
        required = ", ".join(f"{k}={v}" for k, v in SAFETY_ENV.items())
        return f"{', '.join(overridden)} set: the benchmark runs only with {required} (or --allow-multicast)"
    for settings in (SAFETY_ENV, MEASUREMENT_ENV):
        for key, value in settings.items():
            environ.setdefault(key, value)
    return None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    source = parser.add_argument_group("what is compared")
    source.add_argument("--profile", help="the profile the planner reads (with --routes: priced from)")
    source.add_argument("--launcher", default=",".join(LAUNCHERS), help="launchers to plan, comma-separated")
    source.add_argument("--model", help="the served model's preset (hidden and layers)")
    source.add_argument("--hidden", type=int, help="the served model's hidden size")
    source.add_argument("--env", action="append", default=[], metavar="LAUNCHER:KEY=VALUE",
                        help="the user's own env for one launcher's default (repeatable)")  # fmt: skip
    source.add_argument("--workload", help="the planner's workload (a preset or a file)")
    source.add_argument(
        "--routes", help="JSON or a JSON file: default/plan[/nccl] routes, instead of the planner"
    )
    source.add_argument("--group-class", help="with --routes: the group's interconnect class")
    source.add_argument("--nccl", action="store_true", help="also time NCCL (the baseline) at every size")
    shape = parser.add_argument_group("the steps")
    shape.add_argument("--layers", type=int, help="decoder layers per step [default: the model's, else 4]")
    shape.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)), help="steady sizes, tokens")
    shape.add_argument("--prefill", type=int, default=2048, help="mixed sequence: the prefill chunk's tokens")
    shape.add_argument("--batch", type=int, default=32, help="mixed sequence: the decode steps' batch")
    shape.add_argument("--decodes", type=int, default=8, help="mixed sequence: decode steps after the chunk")
    method = parser.add_argument_group("the method")
    method.add_argument("--steps-per-replay", type=int, default=4, help="K passes of a case per replay")
    method.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    method.add_argument("--warmup", type=int, default=2)
    method.add_argument("--allow-multicast", action="store_true")
    method.add_argument("--nproc", type=int, default=2, help="ranks to start when not under torchrun")
    method.add_argument("--timeout", type=float, default=1800.0, help="seconds for the ranks started here")
    parser.add_argument("--out", type=Path, help="write every sample and summary as JSON here")
    args = parser.parse_args(argv)
    if args.rounds < MIN_ROUNDS:
        parser.error(f"--rounds must be >= {MIN_ROUNDS} (the method's medians and CIs)")
    if min(args.steps_per_replay, args.warmup + 1, args.nproc) < 1 or (
        args.layers is not None and args.layers < 1
    ):
        parser.error("--steps-per-replay, --layers and --nproc must be >= 1, --warmup >= 0")
    try:
        args.token_list = [int(t) for t in args.tokens.split(",")]
        args.cases = make_cases(args.token_list, prefill=args.prefill, batch=args.batch, decodes=args.decodes)
    except ValueError as error:
        parser.error(f"--tokens/--prefill/--batch/--decodes: {error}")
    args.user_env = _user_envs(parser, args.env)
    _check_names(parser, args)
    if args.routes is not None:
        try:
            text = args.routes if args.routes.lstrip().startswith("{") else Path(args.routes).read_text()
            args.routings = parse_routes(text)
        except (OSError, UnicodeDecodeError) as error:
            parser.error(f"--routes {args.routes}: {error}")
        except RoutesError as error:
            parser.error(str(error))
        if args.hidden is None and args.model is None:
            parser.error("--routes needs --hidden or --model (the served model's shape)")
    elif args.profile is None:
        parser.error("give --profile (the planner's plans) or --routes")
    else:
        args.launchers = args.launcher.split(",")
        unknown = sorted(set(args.launchers) - set(LAUNCHERS))
        if unknown:
            parser.error(f"unknown launcher(s) {unknown} (known: {', '.join(LAUNCHERS)})")
    return args


def _check_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The model, workload and profile, before any rank starts."""
    from topo_gate.launchers.plan.workload import WorkloadError, lookup_workload
    from topo_gate.models import UnknownModel, lookup_model

    try:
        if args.model is not None:
            lookup_model(args.model)
        lookup_workload(args.workload)
    except (UnknownModel, WorkloadError) as error:
        parser.error(str(error))
    if args.profile is not None and not Path(args.profile).exists():
        parser.error(f"--profile {args.profile}: no such file or folder")
    if args.out is not None:
        from topo_gate._atomic import OutputRefused, check_output_path

        try:
            check_output_path(args.out)
        except OutputRefused as error:
            parser.error(f"--out: {error}")


def _user_envs(parser: argparse.ArgumentParser, items: Sequence[str]) -> dict[str, dict[str, str]]:
    envs: dict[str, dict[str, str]] = {}
    for item in items:
        launcher, _, setting = item.partition(":")
        key, equals, value = setting.partition("=")
        if launcher not in LAUNCHERS or not key or not equals:
            parser.error(
                f"--env {item!r}: expected LAUNCHER:KEY=VALUE with a launcher of {', '.join(LAUNCHERS)}"
            )
        envs.setdefault(launcher, {})[key] = value
    return envs


def launchers(args: argparse.Namespace, world_size: int) -> list[Any]:
    from _decode_setup import from_planner, from_routes

    from topo_gate.models import lookup_model

    baseline = ("nccl" if args.device == "cuda" else "gloo") if args.nccl else None
    if args.routes is not None:
        hidden = args.hidden or lookup_model(args.model).hidden
        return [
            from_routes(
                args.routings, hidden=hidden, profile=args.profile, tp=world_size, cases=args.cases,
                baseline=baseline, group_class=args.group_class,
            )
        ]  # fmt: skip
    return [
        from_planner(
            name, args.profile, tp=world_size, model=args.model, hidden=args.hidden,
            user_env=args.user_env.get(name, {}), workload=args.workload, baseline=baseline,
        )
        for name in args.launchers
    ]  # fmt: skip


def run_rank(args: argparse.Namespace) -> None:
    """One rank: join the group, time every launcher's cases, and (rank 0) report."""
    import torch
    from _decode_graph import Kernels, Model, join_group

    from topo_gate.models import lookup_model
    from topo_gate.profile.schema import FUSED_PATTERN
    from topo_gate.trials.backends.base import BackendContext
    from topo_gate.trials.worker.timing import make_timer

    env, device = join_group(args.device)
    compared = launchers(args, env.world_size)
    ran = [launcher for launcher in compared if launcher.skipped is None]
    hidden = {launcher.hidden for launcher in ran} or {args.hidden or 64}
    if len(hidden) != 1:
        raise SystemExit(f"decode_step: the launchers' served hidden sizes differ: {sorted(hidden)}")
    preset_layers = lookup_model(args.model).layers if args.model else None
    layers = args.layers or next((x.layers for x in ran if x.layers), None) or preset_layers or 4
    ctx = BackendContext(
        rank=env.rank, world_size=env.world_size, local_rank=env.local_rank, device=device,
        dtype=torch.bfloat16, hidden=hidden.pop(), max_tokens=max(max(c.steps) for c in args.cases),
        pattern=FUSED_PATTERN, allow_multicast=args.allow_multicast,
        group=torch.distributed.group.WORLD, group_class=next((x.group_class for x in ran), None),
    )  # fmt: skip
    header = {
        "format": "topo-gate/decode-step/v1", "device": args.device, "world_size": env.world_size,
        "hidden": ctx.hidden, "layers": layers, "sites": 2 * layers, "dtype": "bfloat16",
        "steps_per_replay": args.steps_per_replay, "rounds": args.rounds, "warmup": args.warmup,
        "tokens": args.token_list, "mixed": {"prefill": args.prefill, "batch": args.batch, "decodes": args.decodes},
        "torch": torch.__version__, "env": {k: os.environ.get(k) for k in (*SAFETY_ENV, *MEASUREMENT_ENV)},
    }  # fmt: skip
    model = Model(ctx, 2 * layers, sorted({t for case in args.cases for t in case.steps}))
    kernels = Kernels(ctx)
    timer = make_timer(device, ctx.group, args.steps_per_replay, args.warmup)
    results = [time_launcher(launcher, args, model, kernels, timer) for launcher in compared]
    kernels.close()
    torch.distributed.destroy_process_group()
    if env.rank == 0:
        report(header, results, args.out)


def time_launcher(
    launcher: Any, args: argparse.Namespace, model: Any, kernels: Any, timer: Any
) -> dict[str, Any]:
    """Capture, check and time every configuration of every case (module docstring), then summarise."""
    from _decode_cases import case_estimates, step_names
    from _decode_graph import check, release, sequence, slowest
    from _decode_report import case_entry, config_entry, launcher_entry

    from topo_gate.trials.worker.context import rotated

    if launcher.skipped is not None:
        return launcher_entry(launcher, [])
    configs = [c for c in CONFIGS if c in launcher.routings]
    keys = [(case, config) for case in args.cases for config in configs]
    names = {(case, c): step_names(launcher.routings[c], case) for case, c in keys}
    reasons = {
        (case, c): next((r for t, n in zip(case.steps, names[(case, c)], strict=True) if (r := kernels.reason(n, t))), None)
        for case, c in keys
    }  # fmt: skip
    graphs = {
        key: timer.prepare(
            sequence(model, kernels, key[0].steps, names[key]),
            after_capture=kernels.after_capture(names[key]),
        )
        for key in keys
        if reasons[key] is None
    }
    model.load_checkable()
    checked = {key: check(timer, graph, model, key[0].steps) for key, graph in graphs.items()}
    model.randomise()
    samples: dict[Any, list[float]] = {key: [] for key in graphs if checked[key]["ok"]}
    for round_index in range(args.rounds):
        for case in args.cases:
            for config in rotated([c for c in configs if (case, c) in samples], round_index):
                sample = timer.measure(graphs[(case, config)])
                samples[(case, config)].append(slowest(sample.per_call_us, model.ctx))
    release(graphs, model.ctx)
    entries = []
    for case in args.cases:
        estimates = None
        if launcher.pricing is not None and "default" in configs:
            own = {c: names[(case, c)] for c in configs}
            estimates = case_estimates(launcher.pricing, own, case.steps, sites=model.sites)
        entry = {
            c: config_entry(names[(case, c)], reasons[(case, c)], checked.get((case, c)), samples.get((case, c), ()))
            for c in configs
        }  # fmt: skip
        entries.append(case_entry(launcher, case, entry, estimates))
    return launcher_entry(launcher, entries)


def report(header: dict[str, Any], results: list[dict[str, Any]], out: Path | None) -> None:
    from _decode_report import render

    from topo_gate._atomic import write_atomic

    for result in results:
        print(render(result, header), end="\n\n", flush=True)
    if out is not None:
        write_atomic(out, json.dumps({**header, "launchers": results}, indent=1) + "\n")
        print(f"samples: {out}")


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    refusal = enforce_safety(os.environ, allow_multicast=args.allow_multicast)
    if refusal:
        print(f"decode_step: error: {refusal}", file=sys.stderr)
        return 2
    if "RANK" in os.environ:
        run_rank(args)
        return 0
    from _ranks import RANK_FLAG, spawn_ranks

    forwarded = [a for a in argv if a != RANK_FLAG]
    spawn_ranks(Path(__file__), args.nproc, forwarded, timeout_s=args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--as-rank"]))
