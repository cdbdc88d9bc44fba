"""Default vs plan, per launcher and served model, at chosen token counts: what a profile's price table
says each launcher's plan saves (or does not) over leaving the launcher alone.

    python benchmarks/plan_prices.py profiles/h200-x2/h7168-run1.yaml --tp 2
    python benchmarks/plan_prices.py profiles/examples/synthetic-rtxpro6000-pcie-x4.yaml --tp 4 \\
        --models qwen3-32b --env vllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm

Per row: the knobs the planner chose, then at each token count the default's and the plan's price
per call of the all-reduce + RMSNorm site and of the plain all-reduce (us, median plus the expected
size-transition cost, priced as the planner prices them), and the workload's expected all-reduce
time per step. ``n/a``: the default's path is not measured there (the plan leaves it alone).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from topo_gate.launchers import PLANNERS  # noqa: E402 -- after the path
from topo_gate.launchers.costmodel import price_at  # noqa: E402
from topo_gate.launchers.explain import totals  # noqa: E402

TOKENS = (1, 8, 64, 512, 2048)


def _price(variant, pattern: str, side: str, tokens: int) -> str:
    nbytes = tokens * variant.pricing.row_bytes
    chosen = variant.plan if side == "plan" else variant.default
    other = variant.default if side == "plan" else variant.plan
    name = chosen.name_at(pattern, nbytes)
    same = name == other.name_at(pattern, nbytes) and chosen.priors_of(name) == other.priors_of(name)
    pessimistic = side == "plan" and not same
    price = price_at(pattern, name, nbytes, chosen, variant.pricing, pessimistic=pessimistic)
    if isinstance(price, str):
        return "n/a"
    return f"{price.per_call(variant.pricing.step.calls):.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profile")
    parser.add_argument("--tp", type=int, required=True)
    parser.add_argument("--models", default="deepseek-v3,llama-3.1-70b,qwen3-32b")
    parser.add_argument("--launchers", default="sglang,vllm,trtllm")
    parser.add_argument("--workload", default=None)
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="LAUNCHER:KEY=VALUE",
        help="a user env var for one launcher",
    )
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    envs: dict[str, dict[str, str]] = {}
    for item in args.env:
        launcher, _, setting = item.partition(":")
        key, _, value = setting.partition("=")
        envs.setdefault(launcher, {})[key] = value
    head = [
        "launcher",
        "model",
        "knobs",
        *(f"{t} tok default/plan (norm site; plain)" for t in tokens),
        "us/step default -> plan",
    ]
    print(" | ".join(head))
    for launcher in args.launchers.split(","):
        for model in args.models.split(","):
            plan = PLANNERS[launcher](
                args.profile,
                tp=args.tp,
                model=model,
                trust_unverified_node=True,
                user_env=envs.get(launcher, {}),
                workload=args.workload,
            )
            if plan.choice is None or plan.workload is None:
                print(f"{launcher} | {model} | fallback: {plan.reason}")
                continue
            variant = plan.choice.worst
            knobs = " ".join(
                [*plan.args, *(f"{k}={v}" for k, v in plan.env.items()), *map(str, plan.config.items())]
            )
            cells = []
            for count in tokens:
                norm = f"{_price(variant, 'allreduce_rmsnorm', 'default', count)}/{_price(variant, 'allreduce_rmsnorm', 'plan', count)}"
                plain = f"{_price(variant, 'allreduce', 'default', count)}/{_price(variant, 'allreduce', 'plan', count)}"
                cells.append(f"{norm}; {plain}")
            data = totals(plan.choice, plan.workload)
            step = (
                "n/a"
                if data["default_us_per_step"] is None
                else f"{data['default_us_per_step']:.1f} -> {data['plan_us_per_step']:.1f} ({data['measured_share']:.0%} measured)"
            )
            print(" | ".join([launcher, model, knobs or "(no knobs)", *cells, step]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
