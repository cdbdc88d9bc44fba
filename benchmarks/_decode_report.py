"""What ``decode_step.py`` writes and prints: per launcher and case, the samples, their summary against
the default, the planner's estimate and the verdict (``--out`` JSON), and a table per launcher. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from _decode_cases import Case, Estimate, judge, ratio_to_default
from _decode_setup import Launcher

from topo_gate.evidence.stats import median, median_interval

FORMAT = "topo-gate/decode-step/v1"


def config_entry(
    names: Sequence[str], reason: str | None, checked: Mapping[str, Any] | None, samples: Sequence[float]
) -> dict[str, Any]:
    """One configuration at one case: what it runs per step, whether it ran, its check and samples."""
    status = "unavailable" if reason else "wrong" if checked is not None and not checked["ok"] else "ok"
    entry: dict[str, Any] = {
        "names": list(names), "status": status, "reason": reason or (checked or {}).get("reason"),
        "check": None if checked is None else dict(checked), "samples_us": list(samples),
    }  # fmt: skip
    if samples:
        entry["median_us"] = median(samples)
        entry["ci_us"] = list(median_interval(samples))
    return entry


def case_entry(
    launcher: Launcher,
    case: Case,
    configs: Mapping[str, dict[str, Any]],
    estimates: Mapping[str, Estimate] | None,
) -> dict[str, Any]:
    """A case: each configuration's entry, the estimate, and every other configuration against the
    default (ratio of medians with its bootstrap CI, measured saving, verdict) where both have samples."""
    entry: dict[str, Any] = {"case": case.label, "steps": list(case.steps), "configs": dict(configs)}
    entry["estimate"] = None if estimates is None else {
        config: {"us": e.us, "transition_us": e.transition_us, "source": e.source, "reason": e.reason}
        for config, e in estimates.items()
    }  # fmt: skip
    default = configs.get("default", {})
    compared = {}
    for config, own in configs.items():
        if config == "default" or not default.get("samples_us") or not own.get("samples_us"):
            continue
        ratio = ratio_to_default(
            default["samples_us"], own["samples_us"], seed=f"{launcher.label}/{case.label}/{config}"
        )
        none = Estimate(None, reason="no --profile to price with")
        verdict = judge(
            estimates["default"] if estimates else none,
            estimates[config] if estimates else none,
            same_path=own["names"] == default["names"],
            default_median_us=default["median_us"],
            ratio=ratio,
        )
        compared[config] = {
            "over_default": [ratio.value, ratio.low, ratio.high],
            "measured_saving_us": list(verdict.measured_saving_us),
            "estimated_saving_us": verdict.estimated_saving_us,
            "slower": verdict.slower, "faster": verdict.faster, "within_tolerance": verdict.within,
            "verdict": verdict.words,
        }  # fmt: skip
    entry["compared"] = compared
    return entry


def launcher_entry(launcher: Launcher, cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "launcher": launcher.label, "knobs": launcher.knobs, "skipped": launcher.skipped,
        "routes": {config: routing.words for config, routing in launcher.routings.items()},
        "hidden": launcher.hidden, "model_layers": launcher.layers, "group_class": launcher.group_class,
        "notes": list(launcher.notes), "planner_estimate": launcher.estimate_line,
        "planner_workload_totals": None if launcher.totals is None else dict(launcher.totals),
        "inputs": dict(launcher.inputs), "cases": list(cases),
    }  # fmt: skip


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _names(entry: Mapping[str, Any], default: Mapping[str, Any] | None) -> str:
    names = entry["names"]
    if default is not None and names == default["names"]:
        return "same"
    distinct = list(dict.fromkeys(names))
    return distinct[0] if len(distinct) == 1 else " / ".join(distinct)


def render(result: Mapping[str, Any], header: Mapping[str, Any]) -> str:
    """One launcher's table: per case, the default's median step, each other configuration's with its
    ratio to the default (95% CI), the estimate's saving and the measured one, and the verdict."""
    lines = [
        f"{result['launcher']}: plan {result['knobs']}; {header['layers']} layers = {header['sites']} "
        f"all-reduce + RMSNorm sites per step, hidden {result['hidden']}, TP{header['world_size']}, "
        f"{header['device']}, K={header['steps_per_replay']} passes per replay, {header['rounds']} rounds"
    ]
    if result["skipped"]:
        return "\n".join([*lines, f"  not compared: {result['skipped']}"])
    lines += [f"  {config}: {words}" for config, words in result["routes"].items()]
    head = (
        "case",
        "config",
        "runs",
        "us/pass",
        "95% CI",
        "vs default",
        "est. AR+norm us",
        "est. saving",
        "meas. saving",
        "verdict",
    )
    rows = [head]
    for case in result["cases"]:
        default = case["configs"].get("default")
        for config, entry in case["configs"].items():
            estimate = (case["estimate"] or {}).get(config) or {}
            compared = case["compared"].get(config)
            ci = entry.get("ci_us")
            rows.append((
                case["case"] if config == "default" else "", config,
                _names(entry, None if config == "default" else default),
                _us(entry.get("median_us")) if entry["status"] == "ok" else entry["status"],
                f"{ci[0]:.1f}-{ci[1]:.1f}" if ci else "",
                "" if compared is None else "{:.3f} ({:.3f}-{:.3f})".format(*compared["over_default"]),
                _us(estimate.get("us")),
                "" if compared is None else _us(compared["estimated_saving_us"]),
                "" if compared is None else "{:+.1f} ({:+.1f}..{:+.1f})".format(*compared["measured_saving_us"]),
                (compared or {}).get("verdict") or (entry["reason"] or ""),
            ))  # fmt: skip
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    lines += [
        "  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    totals = result["planner_workload_totals"]
    if totals and totals.get("default_us_per_step") is not None:
        lines.append(
            f"  planner, workload '{totals['workload']}' ({totals['layers']} layers, norm and plain sites): "
            f"default {totals['default_us_per_step']:.1f} -> plan {totals['plan_us_per_step']:.1f} us of all-reduce per step"
        )
    lines += [f"  note: {note}" for note in result["notes"]]
    return "\n".join(lines)
