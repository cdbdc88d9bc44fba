"""Default vs plan, per launcher and served model, per step at chosen token counts: what a profile's
price table says each launcher's plan saves (or does not) over leaving the launcher alone.

    python benchmarks/plan_prices.py profiles/h200-x2/h7168-run1.yaml --tp 2
    python benchmarks/plan_prices.py profiles/h200-x2/h7168-run1.yaml --tp 2 --measurable
    python benchmarks/plan_prices.py profiles/examples/synthetic-rtxpro6000-pcie-x4.yaml --tp 4 \\
        --models qwen3-32b --env vllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
    python benchmarks/plan_prices.py --knob-cases

Per row (profile, launcher, served model): the knobs the planner chose, then at each token count the whole step's all-reduce time,
default -> plan (us per step: every call site of the served model plus each buffer's transition once,
priced as the planner prices it; ``n/a``: a default path there was not measured, which the plan
leaves alone), and the workload's expected all-reduce time per step. Then the saving over the
workload (us per step) of the plan, of the best admissible knob set (each priced as the planner priced
it, on its worst node variant, no tie margin), and the plan's share of the best (``-``: nothing
admissible saves). ``--measurable`` gives each launcher the env that makes its default a measured
path (SGLang's legacy custom all-reduce, vLLM's TRT-LLM FlashInfer backend, TensorRT-LLM's table
AUTO). ``--knob-cases`` adds the launcher tests' synthetic nodes, each planned for its own launcher
at its own TP size and user settings. The last column says what binds a "no knobs".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from topo_gate.launchers import PLANNERS, PlanRequest  # noqa: E402 -- after the path
from topo_gate.launchers.plan.costmodel import step_check  # noqa: E402
from topo_gate.launchers.plan.explain import explanation  # noqa: E402
from topo_gate.profile import Profile  # noqa: E402

TOKENS = (1, 8, 64, 256, 2048)
MEASURABLE = {
    "sglang": {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"},
    "vllm": {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
    "trtllm": {"TLLM_DISABLE_ALLREDUCE_AUTOTUNE": "1"},
}


def _step(variant, tokens: int) -> str:
    check = step_check(tokens * variant.pricing.row_bytes, variant.plan, variant.default, variant.pricing)
    if not check.complete:
        return "n/a"
    plan = check.plan_us if check.why is None else check.default_us
    return f"{check.default_us:.0f} -> {plan:.0f}"


def _savings(choice) -> tuple[float, float]:
    """(the plan's saving, the best admissible candidate's), us per step over the workload."""

    def saving(variants) -> float:
        worst = max(variants, key=lambda v: v.total.plan_us or 0.0)
        return (worst.total.default_us or 0.0) - (worst.total.plan_us or 0.0)

    best = max((saving(variants) for _, variants in choice.admitted), default=0.0)
    return saving(choice.variants), best


def _share(plan_saving: float, best_saving: float) -> str:
    return "-" if best_saving <= 0 else f"{plan_saving / best_saving:.1%}"


def _binds(data: dict) -> str:
    """What keeps a no-knobs plan at the default: unmeasured default paths, and a saving a missing
    transition measurement could unlock."""
    found = [
        f"default not measured: {entry['path']} at {entry['tokens'][0]}-{entry['tokens'][1]} tokens"
        for entry in data["unmeasured"]
    ]
    unlock = data["unlock"]
    if unlock is not None:
        found.append(
            f"{' '.join(unlock['args']) or unlock['env']}: up to {-unlock['saving_us_per_step']:+.0f} us/step "
            f"if {unlock['kernel']} after {unlock['after_tokens']:g} tokens <= {unlock['at_most_us']:.0f} us "
            f"at each smaller size not timed after it (binding at {unlock['at_tokens']:g})"
        )
    return "; ".join(found)


@dataclass(frozen=True)
class Node:
    """A profile to plan from, at one TP size, for some launchers, with the user's own settings."""

    label: str
    profile: str | Profile
    tp: int
    launchers: tuple[str, ...]
    envs: Mapping[str, Mapping[str, str]]
    user_args: tuple[str, ...] = ()


def _knob_case_nodes() -> list[Node]:
    """The launcher tests' synthetic nodes (``tests/launchers/knob_cases.py``), each with its own
    launcher, TP size and user settings: the nodes where a plan carries knobs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "launchers"))
    from knob_cases import CASES, FUSION_LIMIT_TIE

    return [
        Node(
            case.name,
            case.profile(),
            case.tp,
            (case.launcher,),
            {case.launcher: case.user_env},
            case.user_args,
        )
        for case in (*CASES, FUSION_LIMIT_TIE)
    ]


def _rows(node: Node, models: list[str], tokens: list[int], workload: str | None) -> Iterator[list[str]]:
    for launcher in node.launchers:
        for model in models:
            request = PlanRequest(
                node.profile,
                tp=node.tp,
                model=model,
                trust_unverified_node=True,
                user_args=node.user_args,
                user_env=dict(node.envs.get(launcher, {})),
                workload=workload,
            )
            plan = PLANNERS[launcher](request)
            if plan.choice is None or plan.workload is None:
                yield [node.label, launcher, model, f"fallback: {plan.reason}"]
                continue
            variant = plan.choice.worst
            knobs = " ".join(
                [*plan.args, *(f"{k}={v}" for k, v in plan.env.items()), *map(str, plan.config.items())]
            )
            data = explanation(plan.choice, plan.workload, launcher).to_json()
            step = (
                "n/a"
                if data["default_us_per_step"] is None
                else f"{data['default_us_per_step']:.0f} -> {data['plan_us_per_step']:.0f} ({data['measured_share']:.0%})"
            )
            cells = [_step(variant, count) for count in tokens]
            binds = "" if knobs else _binds(data)
            saves, best = _savings(plan.choice)
            savings = [f"{saves:.1f}", f"{best:.1f}", _share(saves, best)]
            yield [node.label, launcher, model, knobs or "(no knobs)", *cells, step, *savings, binds]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profiles", nargs="*", metavar="profile")
    parser.add_argument("--tp", type=int, help="the TP size to plan the profiles at (required with one)")
    parser.add_argument(
        "--knob-cases",
        action="store_true",
        help="also the launcher tests' synthetic nodes, each at its own TP, launcher and user settings",
    )
    parser.add_argument("--models", default="deepseek-v3,llama-3.1-70b,qwen3-32b")
    parser.add_argument("--launchers", default="sglang,vllm,trtllm")
    parser.add_argument("--workload", default=None)
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    parser.add_argument("--measurable", action="store_true", help="the env that makes each default measured")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="LAUNCHER:KEY=VALUE",
        help="a user env var for one launcher",
    )
    args = parser.parse_args()
    if args.profiles and args.tp is None:
        parser.error("--tp is required with a profile")
    if not args.profiles and not args.knob_cases:
        parser.error("name a profile or --knob-cases")
    tokens = [int(t) for t in args.tokens.split(",")]
    envs: dict[str, dict[str, str]] = {k: dict(v) for k, v in MEASURABLE.items()} if args.measurable else {}
    for item in args.env:
        launcher, _, setting = item.partition(":")
        key, _, value = setting.partition("=")
        envs.setdefault(launcher, {})[key] = value
    nodes = [Node(Path(p).name, p, args.tp, tuple(args.launchers.split(",")), envs) for p in args.profiles]
    if args.knob_cases:
        nodes += _knob_case_nodes()
    head = [
        "profile",
        "launcher",
        "model",
        "knobs",
        *(f"{t} tok us/step" for t in tokens),
        "workload us/step",
        "saves",
        "best saves",
        "share",
        "binds",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for node in nodes:
        for row in _rows(node, args.models.split(","), tokens, args.workload):
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
