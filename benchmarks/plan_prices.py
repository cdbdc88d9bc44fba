"""Default vs plan, per launcher and served model, per step at chosen token counts: what a profile's
price table says each launcher's plan saves (or does not) over leaving the launcher alone.

    python benchmarks/plan_prices.py profiles/h200-x2/h7168-run1.yaml --tp 2
    python benchmarks/plan_prices.py profiles/h200-x2/h7168-run1.yaml --tp 2 --measurable
    python benchmarks/plan_prices.py profiles/examples/synthetic-rtxpro6000-pcie-x4.yaml --tp 4 \\
        --models qwen3-32b --env vllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm

Per row: the knobs the planner chose, then at each token count the whole step's all-reduce time,
default -> plan (us per step: every call site of the served model plus each buffer's transition once,
priced as the planner prices it; ``n/a``: a default path there was not measured, which the plan
leaves alone), and the workload's expected all-reduce time per step. ``--measurable`` gives each
launcher the env that makes its default a measured path (SGLang's legacy custom all-reduce, vLLM's
TRT-LLM FlashInfer backend, TensorRT-LLM's table AUTO). The last column says what binds a "no knobs".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from topo_gate.launchers import PLANNERS, PlanRequest  # noqa: E402 -- after the path
from topo_gate.launchers.plan.costmodel import step_check  # noqa: E402
from topo_gate.launchers.plan.explain import explanation  # noqa: E402

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
            f"at {unlock['at_tokens']:g}"
        )
    return "; ".join(found)


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
    parser.add_argument("--measurable", action="store_true", help="the env that makes each default measured")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="LAUNCHER:KEY=VALUE",
        help="a user env var for one launcher",
    )
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    envs: dict[str, dict[str, str]] = {k: dict(v) for k, v in MEASURABLE.items()} if args.measurable else {}
    for item in args.env:
        launcher, _, setting = item.partition(":")
        key, _, value = setting.partition("=")
        envs.setdefault(launcher, {})[key] = value
    head = ["launcher", "model", "knobs", *(f"{t} tok us/step" for t in tokens), "workload us/step", "binds"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for launcher in args.launchers.split(","):
        for model in args.models.split(","):
            request = PlanRequest(
                args.profile,
                tp=args.tp,
                model=model,
                trust_unverified_node=True,
                user_env=envs.get(launcher, {}),
                workload=args.workload,
            )
            plan = PLANNERS[launcher](request)
            if plan.choice is None or plan.workload is None:
                print(f"| {launcher} | {model} | fallback: {plan.reason} |")
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
            print("| " + " | ".join([launcher, model, knobs or "(no knobs)", *cells, step, binds]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
