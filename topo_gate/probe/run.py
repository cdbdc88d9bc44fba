"""The main job, orchestrated: topology -> sessions -> trials -> evidence -> decide -> profile.

No click, no rich: the CLI passes ``ProbeOptions`` in, renders the ``ProbeProgress`` events it gets
through ``on_progress``, and prints the ``ProbeResult``. Every step is another module's; this one
only wires them and owns the two files the probe writes (evidence first, then the profile that points
at it by path and digest), both atomically.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from topo_gate._atomic import check_output_path, exclusive_output, new_unique_path
from topo_gate.evidence.document import evidence_from_results, trials_meta, write_evidence
from topo_gate.probe.activity import Activity, GpuBusy, activity
from topo_gate.probe.budget import dropped_notes, duration_words, fit_to_budget, total_seconds
from topo_gate.probe.installed import unavailable_up_front
from topo_gate.probe.jit import flashinfer_jit_note
from topo_gate.probe.node import NodeFacts, cpu_node, gpu_node
from topo_gate.probe.options import (
    JIT_STARTUP_TIMEOUT_S,
    NothingToProbe,
    PlanFailed,
    ProbeOptions,
    ProbeProgress,
    ProbeResult,
    TrialsFailed,
)
from topo_gate.probe.preflight import PreflightRow, preflight
from topo_gate.probe.replay import decide_and_write
from topo_gate.probe.sessions import Deadline, overrun_notes, run_sessions
from topo_gate.profile.schema import DTYPE_BYTES
from topo_gate.trials import plan as planning
from topo_gate.trials.results import PlanResult
from topo_gate.trials.runner import DEFAULT_STARTUP_TIMEOUT_S


def probe(
    options: ProbeOptions,
    *,
    on_progress: Callable[[ProbeProgress], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    on_preflight: Callable[[Sequence[PreflightRow]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ProbeResult:
    """Measure, decide and write. Raises the exceptions listed in ``options``' module docstring.

    ``on_preflight`` gets, before any trial starts, the preflight (``preflight.py``: which launcher
    defaults this run will time, and what makes the others measurable); ``on_note`` then hears what
    else a person should know up front: the estimated duration, what was dropped to fit the budget,
    FlashInfer's first-use compile. While it runs it
    holds ``--out`` (``_atomic.exclusive_output``): a second probe onto the same file is refused at
    once. ``clock`` times the budget (``budget.py``: a session starts only while budget remains, the
    first always does) and the phases of the progress display.
    """
    if options.evidence_out is not None:
        check_output_path(options.evidence_out)  # refuse a FIFO or a missing folder before the trials
    with exclusive_output(options.out):
        return _probe_holding_out(options, on_progress, on_note, on_preflight, clock)


def _probe_holding_out(
    options: ProbeOptions,
    on_progress: Callable[[ProbeProgress], None] | None,
    on_note: Callable[[str], None] | None,
    on_preflight: Callable[[Sequence[PreflightRow]], None] | None,
    clock: Callable[[], float],
) -> ProbeResult:
    facts = cpu_node(options.tps) if options.device == "cpu" else gpu_node(options.capture, options.command)
    sessions, skipped = plan_trials(facts, options)
    if not sessions:
        raise NothingToProbe(nothing_to_probe(facts, skipped))
    found = _activity(facts, sessions)
    if found.busy and not options.allow_busy:
        raise GpuBusy(found.refusal())
    sessions, fitted = fit_to_budget(sessions, options.budget_s, options.device)
    checks = preflight_rows(facts, sessions, options)
    if on_preflight is not None:
        on_preflight(checks)
    jit_note = flashinfer_jit_note(facts.sms) if options.device == "cuda" else None
    notes = ([jit_note] if jit_note else []) + dropped_notes(fitted) + _activity_notes(found, options)
    if on_note is not None:
        estimate = duration_words(total_seconds(sessions, options.device))
        on_note(
            f"{len(sessions)} worker session(s), about {estimate} by the planner's estimate "
            "(re-fitted on the progress line once rounds are timed)"
        )
        for note in notes:
            on_note(note)
    started = clock()
    until = None if options.budget_s is None else started + options.budget_s
    ran = run_sessions(
        sessions,
        facts,
        options,
        startup_timeout_s=JIT_STARTUP_TIMEOUT_S if jit_note is not None else DEFAULT_STARTUP_TIMEOUT_S,
        deadline=Deadline(clock, until, options.budget_s),
        on_progress=on_progress,
    )
    results = ran.results
    notes += dropped_notes(ran.dropped) + overrun_notes(ran.phases)
    evidence_path = options.evidence_out or new_unique_path(options.out.parent, "evidence-", ".json")
    node_block = {**facts.block(), "software": _merged_software(facts.software, results)}
    budget = {"seconds": options.budget_s, "dropped": [item.to_dict() for item in [*fitted, *ran.dropped]]}
    evidence = evidence_from_results(
        results, node_block, _trials_block(sessions, options), skipped, capture=facts.capture, budget=budget,
        preflight=[row.to_dict() for row in checks],
        activity={"allow_busy": options.allow_busy, "busy": list(found.busy), "unread": list(found.unread)},
    )  # fmt: skip
    write_evidence(evidence_path, evidence)
    if results and all(result.error for result in results):
        raise TrialsFailed(f"no trial ran: {results[0].error}; evidence kept at {evidence_path}")
    failed = [result for result in results if result.error]
    if failed and not options.allow_partial:
        names = "; ".join(f"{plan_label(r.plan)}: {r.error}" for r in failed)
        raise PlanFailed(
            f"plan failed after a retry: {names}; no profile written (evidence kept at {evidence_path}; "
            "--allow-partial writes one that records the plan as failed)"
        )
    return decide_and_write(evidence, evidence_path, options.out, options.settings, notes)


def _activity(facts: NodeFacts, sessions: Sequence[planning.SessionPlan]) -> Activity:
    """What the node's capture says the GPUs of this run's groups are doing (nothing on the CPU harness)."""
    capture = getattr(facts.planner, "capture", None)
    if capture is None:
        return Activity((), ())
    return activity(capture, (gpu for session in sessions for gpu in session.group))


def _activity_notes(found: Activity, options: ProbeOptions) -> list[str]:
    notes = [f"measuring on a busy GPU (--allow-busy): {'; '.join(found.busy)}"] if found.busy else []
    if found.unread:
        notes.append(f"whether these GPUs are in use could not be read: {'; '.join(found.unread)}")
    return notes if options.device == "cuda" else []


def nothing_to_probe(facts: NodeFacts, skipped: Sequence[planning.Skipped]) -> str:
    """Why no requested TP size runs, in one line: "this node has 1 usable GPU: TP 2, 4 and 8 need
    2, 4 and 8; nothing to probe" where the GPU count is the cause, else each size's reason."""
    usable = getattr(facts.planner, "usable", None)
    sizes = [item.tp for item in skipped]
    if usable is not None and sizes and all(tp > len(usable) for tp in sizes):
        listed = _and_list([str(tp) for tp in sizes])
        gpus = f"{len(usable)} usable GPU{'s' if len(usable) != 1 else ''}"
        return f"this node has {gpus}: TP {listed} need{'s' if len(sizes) == 1 else ''} {listed}; nothing to probe"
    return "nothing to probe: " + "; ".join(f"TP {item.tp}: {item.reason}" for item in skipped)


def _and_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def plan_label(plan: planning.TrialPlan) -> str:
    return f"TP{plan.tp} {plan.group_class} {plan.pattern}"


def plan_trials(
    facts: NodeFacts, options: ProbeOptions
) -> tuple[list[planning.SessionPlan], list[planning.Skipped]]:
    """One session per (TP, group class), a plan per pattern in it; TP sizes that cannot run are
    skipped with why. The layer graphs of a GPU group include the launchers' default paths there."""
    return planning.make_sessions(
        facts.planner,
        options.tps,
        patterns=options.patterns,
        device=options.device,
        dtype=options.dtype,
        hidden=options.hidden,
        max_tokens=options.max_tokens,
        graph_calls=options.graph_calls,
        rounds=options.rounds,
        warmup=options.warmup,
        allow_multicast=options.allow_multicast,
        margin=options.settings.margin,
        faults=options.faults,
        context_backends=context_paths(facts, options),
        buffer_caps=cap_tokens(facts, options),
    )


def preflight_rows(
    facts: NodeFacts, sessions: Sequence[planning.SessionPlan], options: ProbeOptions
) -> tuple[PreflightRow, ...]:
    """The preflight of this run (``preflight.py``): its plans' backends, each with the reason it is
    known up front not to run here; nothing without the launchers' routes (``default_routes``)."""
    if options.default_routes is None and options.device == "cuda":
        return ()
    names = sorted({name for session in sessions for plan in session.plans for name in plan.backends})
    refused = unavailable_up_front(names, options.device, sms=facts.sms)
    return preflight(
        facts,
        [session.tp for session in sessions],
        hidden=options.hidden,
        itemsize=DTYPE_BYTES[options.dtype],
        model=options.model,
        patterns=options.patterns,
        backends={name: refused.get(name) for name in names},
        routes=options.default_routes or _no_routes,
        max_tokens={session.tp: session.plans[0].tokens[-1] for session in sessions},
        device=options.device,
    )


def _no_routes(**_: object) -> list[dict[str, object]]:
    return []  # the CPU harness asks no launcher


def cap_tokens(facts: NodeFacts, options: ProbeOptions) -> dict[int, tuple[int, ...]]:
    """Per TP size, the launchers' Lamport buffer caps in tokens of the probed hidden size on this
    node's GPUs (``options.buffer_caps``); none on the CPU harness, whose backends are no launcher's."""
    if options.buffer_caps is None or options.device != "cuda":
        return {}
    caps: dict[int, tuple[int, ...]] = {}
    for tp in options.tps:
        groups = facts.planner.tp_groups(tp) if tp > 1 else ()
        capability = facts.capabilities.get(groups[0].gpus[0]) if groups else None
        if capability is not None:
            found = options.buffer_caps(tp=tp, capability=capability, hidden=options.hidden,
                                        itemsize=DTYPE_BYTES[options.dtype])  # fmt: skip
            caps[tp] = tuple(sorted({cap.tokens for cap in found}))
    return caps


def context_paths(facts: NodeFacts, options: ProbeOptions) -> dict[tuple[int, str, str], tuple[str, ...]]:
    """Per (TP, group class, pattern): the launchers' default paths there (``options.default_paths``),
    sorted; empty on the CPU harness, whose backends are no launcher's."""
    if options.default_paths is None or options.device != "cuda":
        return {}
    paths: dict[tuple[int, str, str], tuple[str, ...]] = {}
    for tp in options.tps:
        for group in facts.planner.tp_groups(tp) if tp > 1 else ():
            capability = facts.capabilities.get(group.gpus[0])
            if capability is None:
                continue  # no SM known: no launcher route can be computed
            for pattern in options.patterns:
                names = options.default_paths(
                    tp=tp, capability=capability, group_class=group.group_class, hidden=options.hidden,
                    itemsize=DTYPE_BYTES[options.dtype], pattern=pattern,
                )  # fmt: skip
                paths.setdefault((tp, group.group_class, pattern), tuple(sorted(names)))
    return paths


def _trials_block(sessions: Sequence[planning.SessionPlan], options: ProbeOptions) -> dict[str, Any]:
    # ``device`` tells decide which baseline the runs were measured against (nccl, or gloo on CPU).
    plans = [plan for session in sessions for plan in session.plans]
    if plans:
        return {**trials_meta(plans, patterns=options.patterns), "device": options.device}
    method = {"graph_calls": options.graph_calls, "rounds": options.rounds, "warmup": options.warmup}
    return {
        "dtype": options.dtype,
        "hidden": options.hidden,
        "tp": [],
        "patterns": list(options.patterns),
        "method": method,
        "device": options.device,
    }


def _merged_software(
    recorded: Mapping[str, str | None], results: Sequence[PlanResult]
) -> dict[str, str | None]:
    # The workers' own readings (the torch and NCCL they actually loaded) beat package metadata.
    merged = dict(recorded)
    for result in results:
        merged.update({key: value for key, value in result.software.items() if value})
    return merged
