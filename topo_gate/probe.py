"""The main job, orchestrated: topology -> plans -> trials -> evidence -> decide -> profile.

No click, no rich: the CLI passes ``ProbeOptions`` in, renders the ``ProbeProgress`` events it gets
through ``on_progress``, and prints the ``ProbeResult``.  Every step is another module's; this one
only wires them and owns the two files the probe writes (evidence first, then the profile that points
at it by path and digest), both atomically.

A replay (``replay``) starts from recorded evidence instead of trials: it rebuilds the topology from
the NVML capture embedded in the evidence (``node.capture``), re-decides, and writes a profile exactly
as the live probe did.  That is how a machine without GPUs turns the bundled H200 evidence into a
real profile, and how a classification or decision fix reaches old measurements.

Errors the CLI maps to exit codes: ``NvmlUnavailable`` (4), ``NvmlCrash`` (5), ``CaptureError`` and
``EvidenceError`` (3), ``BudgetTooSmall`` (2), ``TrialsFailed`` and ``PlanFailed`` (6).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topo_gate._atomic import check_output_path, exclusive_output, new_unique_path
from topo_gate._version import __version__
from topo_gate.decide import DEFAULT_BOOTSTRAP, DEFAULT_CI_LEVEL, DEFAULT_MARGIN, decide, human_bytes
from topo_gate.profile.digest import canonical_json
from topo_gate.profile.io import dump_profile
from topo_gate.profile.schema import (
    PATTERNS,
    SCHEMA,
    EvidenceRef,
    Node,
    Profile,
    Skipped,
    Tool,
    Trials,
)
from topo_gate.profile.validate import check_semantics
from topo_gate.topology.capture import capture_from_dict, capture_to_dict, read_capture
from topo_gate.topology.fingerprint import node_fingerprint
from topo_gate.topology.model import Group, build_node
from topo_gate.topology.model import Node as Topology
from topo_gate.topology.software import python_versions, software_block
from topo_gate.trials import plan as planning
from topo_gate.trials.evidence import evidence_from_results, load_evidence, trials_meta, write_evidence
from topo_gate.trials.runner import DEFAULT_STARTUP_TIMEOUT_S, PlanResult, Progress, run_plan

MIN_ROUNDS = 15  # DESIGN.md: medians of >= 15 interleaved rounds
DEFAULT_TPS = (2, 4, 8)
DEFAULT_MAX_TOKENS = 8192  # a full prefill chunk (SGLang's and vLLM's default chunk size)
DEFAULT_GRAPH_CALLS = 32
DEFAULT_WARMUP = 3
DEFAULT_STEP_TIMEOUT_S = 60.0
JIT_STARTUP_TIMEOUT_S = 900.0  # FlashInfer compiling its communication kernels on first use
CPU_GROUP_CLASS = "cpu-gloo"
#: The CPU harness node's size: TP sizes above it are skipped, as a GPU node skips sizes above its GPU
#: count (``--tp 1000`` would start a thousand workers). Gloo runs oversubscribed, so TP 8 -- the GPU
#: node the harness stands in for -- still runs on a 2-CPU machine.
CPU_HARNESS_RANKS = max(8, os.cpu_count() or 1)


class BudgetTooSmall(Exception):
    """Even the smallest useful probe (15 rounds, one message size) does not fit ``--budget``."""


class TrialsFailed(Exception):
    """No trial ran at all (every plan failed before measuring); the evidence is still written."""


class PlanFailed(Exception):
    """A plan failed twice for a reason outside any backend, and ``allow_partial`` was not given: no
    profile is written (the evidence is), because that plan's sizes would read as NCCL."""


@dataclass(frozen=True)
class DecideSettings:
    margin: float = DEFAULT_MARGIN
    ci_level: float = DEFAULT_CI_LEVEL
    bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = 0


@dataclass(frozen=True)
class ProbeOptions:
    out: Path
    hidden: int
    tps: tuple[int, ...] = DEFAULT_TPS
    dtype: str = "bfloat16"
    patterns: tuple[str, ...] = PATTERNS
    device: str = "cuda"  # "cpu": the gloo harness, for CI and demos
    evidence_out: Path | None = None  # default: evidence-<UTC time>-<pid>.json beside the profile
    capture: Path | None = None  # --from: plan from a recorded capture instead of NVML
    budget_s: float | None = None
    rounds: int = MIN_ROUNDS
    max_tokens: int = DEFAULT_MAX_TOKENS
    graph_calls: int = DEFAULT_GRAPH_CALLS
    warmup: int = DEFAULT_WARMUP
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    allow_multicast: bool = False
    #: Write a profile even when a plan failed; it then records that plan as failed.
    allow_partial: bool = False
    #: The harness tests' fault injection, per pattern (``TrialPlan.faults``; honoured by workers only
    #: with TOPO_GATE_ALLOW_FAULT_INJECTION=1).
    faults: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    settings: DecideSettings = field(default_factory=DecideSettings)
    command: str | None = None  # recorded in provenance


@dataclass(frozen=True)
class ProbeProgress:
    """What ``on_progress`` receives, often: the run in flight and how far the whole probe is.

    ``done_s`` / ``total_s`` are in *estimated* seconds (``plan.estimate_seconds``), so a progress bar
    over them moves at the pace of the work, and its ETA corrects itself as real time passes.
    """

    run: int  # 1-based
    runs: int
    label: str  # "TP2 nvswitch allreduce"
    done_s: float
    total_s: float
    detail: str  # the worker's place ("measure of trtllm_oneshot at 64 tokens (round 3)") or a fault


@dataclass(frozen=True)
class ProbeResult:
    profile: Profile
    profile_path: Path
    evidence_path: Path
    notes: list[str]


@dataclass(frozen=True)
class NodeFacts:
    """The node as the profile records it, plus what planning needs."""

    fingerprint: str
    hardware: dict[str, Any]
    software: dict[str, str | None]
    provenance: dict[str, Any]
    planner: Any  # has tp_groups(tp) -> list[Group] and tp_unavailable(tp) -> str | None
    capture: dict[str, Any] | None = None  # raw NVML answers, embedded in evidence for replay
    sms: tuple[str, ...] = ()  # "9.0" per GPU, for the FlashInfer JIT note
    uuids: Mapping[int, str] = field(default_factory=dict)  # NVML index -> "GPU-..."

    def block(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "hardware": self.hardware,
            "software": self.software,
            "provenance": self.provenance,
        }


# -- the live probe ----------------------------------------------------------------------------------


def probe(
    options: ProbeOptions,
    *,
    on_progress: Callable[[ProbeProgress], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ProbeResult:
    """Measure, decide and write. Raises the exceptions listed in the module docstring.

    ``on_note`` hears, before any trial starts, what a person should know up front: the estimated
    duration, sizes dropped to fit the budget, FlashInfer's first-use compile. While it runs it holds
    ``--out`` (``_atomic.exclusive_output``): a second probe onto the same file is refused at once.
    ``clock`` times the budget (a trial run starts only while budget remains; the first always does).
    """
    if options.evidence_out is not None:
        check_output_path(options.evidence_out)  # refuse a FIFO or a missing folder before the trials
    with exclusive_output(options.out):
        return _probe_holding_out(options, on_progress, on_note, clock)


def _probe_holding_out(
    options: ProbeOptions,
    on_progress: Callable[[ProbeProgress], None] | None,
    on_note: Callable[[str], None] | None,
    clock: Callable[[], float],
) -> ProbeResult:
    facts = cpu_node(options.tps) if options.device == "cpu" else gpu_node(options.capture, options.command)
    plans, skipped = plan_trials(facts, options)
    plans, notes = fit_to_budget(plans, options.budget_s, options.device)
    jit_note = flashinfer_jit_note(facts.sms) if options.device == "cuda" else None
    notes = ([jit_note] if jit_note else []) + notes
    if on_note is not None:
        estimate = _estimate(plans, options.device)
        on_note(f"{len(plans)} trial runs, about {estimate / 60:.1f} min by the planner's estimate")
        for note in notes:
            on_note(note)
    deadline = None if options.budget_s is None else clock() + options.budget_s
    results = _run_all(
        plans,
        facts,
        options,
        jit_expected=jit_note is not None,
        on_progress=on_progress,
        deadline=(clock, deadline),
    )
    if len(results) < len(plans):
        unrun = ", ".join(f"TP{p.tp} {p.group_class} {p.pattern}" for p in plans[len(results) :])
        notes.append(
            f"the {options.budget_s:g} s budget was spent after {len(results)} of {len(plans)} trial runs: "
            f"{unrun} not measured (NCCL there)"
        )
    evidence_path = options.evidence_out or new_unique_path(options.out.parent, "evidence-", ".json")
    node_block = {**facts.block(), "software": _merged_software(facts.software, results)}
    evidence = evidence_from_results(
        results, node_block, _trials_block(plans, options), skipped, capture=facts.capture
    )
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
    return _decide_and_write(evidence, evidence_path, options.out, options.settings, notes)


def plan_label(plan: planning.TrialPlan) -> str:
    return f"TP{plan.tp} {plan.group_class} {plan.pattern}"


def _trials_block(plans: Sequence[planning.TrialPlan], options: ProbeOptions) -> dict[str, Any]:
    # ``device`` tells decide which baseline the runs were measured against (nccl, or gloo on CPU).
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


def plan_trials(
    facts: NodeFacts, options: ProbeOptions
) -> tuple[list[planning.TrialPlan], list[planning.Skipped]]:
    """One plan per (TP, group class, pattern); TP sizes that cannot run are skipped with why."""
    plans, skipped = planning.make_plans(
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
        faults=options.faults,
    )
    return plans, skipped


def fit_to_budget(
    plans: Sequence[planning.TrialPlan], budget_s: float | None, device: str
) -> tuple[list[planning.TrialPlan], list[str]]:
    """Shrink the plans to fit ``budget_s``: first rounds down to 15, then the largest sizes go.

    Large sizes go first because they cost the most and matter least (prefill-sized messages, where
    NCCL usually wins anyway); an unmeasured size is NCCL, so shrinking never enables anything.
    """
    plans = list(plans)
    if budget_s is None or not plans or _estimate(plans, device) <= budget_s:
        return plans, []
    notes = []
    if plans[0].rounds > MIN_ROUNDS:
        notes.append(f"rounds cut from {plans[0].rounds} to {MIN_ROUNDS} to fit the {budget_s:g} s budget")
        plans = [replace(p, rounds=MIN_ROUNDS) for p in plans]
    largest = plans[0].tokens[-1]
    while _estimate(plans, device) > budget_s and len(plans[0].tokens) > 1:
        plans = [replace(p, tokens=p.tokens[:-1]) for p in plans]
    if _estimate(plans, device) > budget_s:
        raise BudgetTooSmall(
            f"the smallest useful probe ({MIN_ROUNDS} rounds, {plans[0].tokens[0]} token) needs about "
            f"{_estimate(plans, device):.0f} s, more than the {budget_s:g} s budget"
        )
    if plans[0].tokens[-1] != largest:
        kept = plans[0].tokens[-1]
        notes.append(
            f"measured up to {kept} tokens ({human_bytes(plans[0].nbytes(kept))}) to fit the {budget_s:g} s "
            f"budget, not {largest}: larger messages stay NCCL (unmeasured)"
        )
    return plans, notes


def _estimate(plans: Sequence[planning.TrialPlan], device: str) -> float:
    return sum(planning.estimate_seconds(plan, device) for plan in plans)


def _run_all(
    plans: Sequence[planning.TrialPlan],
    facts: NodeFacts,
    options: ProbeOptions,
    *,
    jit_expected: bool,
    on_progress: Callable[[ProbeProgress], None] | None,
    deadline: tuple[Callable[[], float], float | None] = (time.monotonic, None),
) -> list[PlanResult]:
    estimates = [planning.estimate_seconds(plan, options.device) for plan in plans]
    total = sum(estimates)
    results = []
    startup_s = JIT_STARTUP_TIMEOUT_S if jit_expected else DEFAULT_STARTUP_TIMEOUT_S
    with tempfile.TemporaryDirectory(prefix="topo-gate-probe-") as workdir:
        clock, until = deadline
        for index, plan in enumerate(plans):
            if index and until is not None and clock() >= until:
                break  # --budget spent: what is not measured stays NCCL
            done_before = sum(estimates[:index])
            label = plan_label(plan)

            def relay(progress: Progress, index=index, label=label, done_before=done_before) -> None:
                if on_progress is None:
                    return
                beat, fault = progress.beat, progress.fault
                fraction = beat.step / beat.steps if beat is not None and beat.steps else 0.0
                detail = (
                    fault.reason if fault is not None else (beat.where() if beat is not None else "starting")
                )
                done = done_before + estimates[index] * min(fraction, 1.0)
                on_progress(ProbeProgress(index + 1, len(plans), label, done, total, detail))

            results.append(
                run_plan(
                    plan,
                    device=options.device,
                    cuda_devices=_cuda_devices(facts, plan.group) if options.device == "cuda" else (),
                    timeout_s=options.step_timeout_s,
                    workdir=Path(workdir) / f"run-{index + 1}",
                    on_progress=relay,
                    startup_timeout_s=startup_s,
                )
            )
            if on_progress is not None:
                on_progress(
                    ProbeProgress(index + 1, len(plans), label, done_before + estimates[index], total, "done")
                )
    return results


def _cuda_devices(facts: NodeFacts, group: Sequence[int]) -> list[str]:
    # UUIDs select the same GPUs whatever CUDA_VISIBLE_DEVICES the user's shell has; NVML indices are
    # PCI bus order, which is what the runner's CUDA_DEVICE_ORDER=PCI_BUS_ID numbers, as a fallback.
    return [facts.uuids.get(index) or str(index) for index in group]


def _merged_software(
    recorded: Mapping[str, str | None], results: Sequence[PlanResult]
) -> dict[str, str | None]:
    # The workers' own readings (the torch and NCCL they actually loaded) beat package metadata.
    merged = dict(recorded)
    for result in results:
        merged.update({key: value for key, value in result.software.items() if value})
    return merged


# -- the node -----------------------------------------------------------------------------------------


def gpu_node(capture_path: Path | None, command: str | None) -> NodeFacts:
    """The GPU node from NVML (in a child process, crash-isolated) or from a recorded capture."""
    return facts_from_topology(build_node(read_capture(capture_path)), command=command)


def facts_from_topology(topology: Topology, *, command: str | None) -> NodeFacts:
    return NodeFacts(
        fingerprint=node_fingerprint(topology),
        hardware=topology.to_hardware_dict(),
        software=software_block(topology),
        provenance={
            "hostname": socket.gethostname(),
            "gpu_uuids": [gpu.uuid for gpu in topology.gpus],
            "command": command,
        },
        planner=topology,
        capture=capture_to_dict(topology.capture),
        sms=tuple(gpu.sm for gpu in topology.gpus if gpu.sm),
        uuids={gpu.index: gpu.uuid for gpu in topology.gpus if gpu.uuid},
    )


@dataclass(frozen=True)
class _CpuPlanner:
    """The CPU harness: one gloo process per rank, no GPUs, up to ``CPU_HARNESS_RANKS`` ranks."""

    def tp_groups(self, tp: int) -> list[Group]:
        if tp > CPU_HARNESS_RANKS:
            return []
        return [Group(tuple(range(tp)), CPU_GROUP_CLASS, "CPU harness: one gloo process per rank")]

    def tp_unavailable(self, tp: int) -> str | None:
        if tp <= CPU_HARNESS_RANKS:
            return None
        return (
            f"the CPU harness node has {CPU_HARNESS_RANKS} ranks (one gloo process each: this machine's "
            f"{os.cpu_count()} CPUs, and at least the 8 GPUs of the nodes it stands in for)"
        )


def cpu_node(tps: Sequence[int]) -> NodeFacts:
    """A pseudo-node for the gloo harness, labelled CPU everywhere it shows.

    It can never pass for a GPU node: its fingerprint hashes ``{"device": "cpu", ...}``, a document no
    GPU node's fingerprint inputs (GPU models, pairs, links) can equal, so the reader answers NCCL on
    every GPU node; its groups are of class ``cpu-gloo``, which no GPU group has; and its backends are
    gloo's, which no launcher knob maps to.
    """
    sizes = sorted({tp for tp in tps if 2 <= tp <= CPU_HARNESS_RANKS})
    hardware = {
        "device": "cpu",
        "interconnect": CPU_GROUP_CLASS,
        "gpu_count": 0,
        "gpus": [],
        "tp_groups": {str(tp): [{"gpus": list(range(tp)), "class": CPU_GROUP_CLASS}] for tp in sizes},
    }
    fingerprint_inputs = {"device": "cpu", "interconnect": CPU_GROUP_CLASS}
    return NodeFacts(
        fingerprint="sha256:" + hashlib.sha256(canonical_json(fingerprint_inputs).encode()).hexdigest(),
        hardware=hardware,
        software={"driver": None, "cuda_driver": None, "nvml": None, **python_versions()},
        provenance={"hostname": socket.gethostname(), "gpu_uuids": [], "cpus": os.cpu_count()},
        planner=_CpuPlanner(),
    )


# -- evidence -> profile (live probe, --replay, decide) ------------------------------------------------


def replay(evidence_path: Path, *, out: Path, settings: DecideSettings | None = None) -> ProbeResult:
    """Re-derive and write a profile from recorded evidence (no GPU, no trials)."""
    evidence = load_evidence(evidence_path)
    return _decide_and_write(evidence, evidence_path, out, settings or DecideSettings(), [])


def preview(evidence_path: Path, *, settings: DecideSettings | None = None) -> ProbeResult:
    """What ``replay`` would write, without writing anything (``profile_path`` is where it would go)."""
    evidence = load_evidence(evidence_path)
    reference = EvidenceRef(path=str(evidence_path), digest=_file_digest(evidence_path))
    profile, notes = build_profile(evidence, reference, settings or DecideSettings())
    return ProbeResult(profile.with_digest(), Path("-"), evidence_path, notes)


def build_profile(
    evidence: Mapping[str, Any], evidence_ref: EvidenceRef | None, settings: DecideSettings
) -> tuple[Profile, list[str]]:
    """The profile the evidence implies (unsealed), and notes for a person. Pure."""
    node_block, notes = replayed_node(evidence["node"])
    decided = decide(
        evidence,
        margin=settings.margin,
        ci_level=settings.ci_level,
        bootstrap=settings.bootstrap,
        seed=settings.seed,
    )
    trials = evidence["trials"]
    method = {
        **trials.get("method", {}),
        "margin": settings.margin,
        "ci_level": settings.ci_level,
        "bootstrap": settings.bootstrap,
    }
    profile = Profile(
        schema=SCHEMA,
        created=_utc_stamp(),
        tool=Tool("topo-gate", __version__),
        node=Node.from_dict(node_block),
        trials=Trials(
            trials["dtype"], trials["hidden"], tuple(trials["tp"]), tuple(trials["patterns"]), method
        ),
        decisions=tuple(decided.decisions),
        skipped=tuple(Skipped(s["tp"], s["reason"]) for s in evidence.get("skipped", [])),
        evidence=evidence_ref,
    )
    check_semantics(profile)  # what the loader would refuse is never shown or written
    return profile, notes + decided.notes


def replayed_node(recorded: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The node block for the profile: rebuilt from ``node.capture`` when the evidence has one, so
    today's classification applies to old measurements; otherwise (CPU evidence) as recorded."""
    block = {key: recorded[key] for key in ("fingerprint", "hardware", "software") if key in recorded}
    block["provenance"] = recorded.get("provenance") or {}
    if recorded.get("capture") is None:
        return block, []
    topology = build_node(capture_from_dict(recorded["capture"], "evidence node.capture"))
    block["fingerprint"] = node_fingerprint(topology)
    block["hardware"] = topology.to_hardware_dict()
    notes = []
    if block["fingerprint"] != recorded.get("fingerprint"):
        notes.append(
            "the node fingerprint rebuilt from the recorded capture differs from the recorded one "
            "(topology classification changed since): the profile uses the rebuilt one"
        )
    return block, notes


def _decide_and_write(
    evidence: Mapping[str, Any], evidence_path: Path, out: Path, settings: DecideSettings, notes: list[str]
) -> ProbeResult:
    reference = EvidenceRef(path=_relative(evidence_path, out.parent), digest=_file_digest(evidence_path))
    profile, more_notes = build_profile(evidence, reference, settings)
    dump_profile(profile, out)
    return ProbeResult(profile.with_digest(), out, evidence_path, notes + more_notes)


def _relative(path: Path, start: Path) -> str:
    try:
        return os.path.relpath(path, start)
    except ValueError:  # another drive on Windows: no relative path exists
        return str(path.resolve())


def _file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- FlashInfer's first-use compile ---------------------------------------------------------------------


def flashinfer_jit_note(sms: Sequence[str]) -> str | None:
    """A note when FlashInfer is installed but its all-reduce kernels are not prebuilt for this SM.

    Checked without importing flashinfer or torch (both take seconds): the ``trtllm_comm`` module is
    looked for where FlashInfer 0.7 loads it from, in order -- ``flashinfer/data/aot/trtllm_comm/``
    (AOT build), the ``flashinfer_jit_cache`` wheel, and the JIT cache of an earlier run
    (``$FLASHINFER_WORKSPACE_BASE or ~/.cache/flashinfer/<version>/<archs>/cached_ops/``, whose
    ``<archs>`` folder names the SMs it was built for, e.g. ``90a``).
    """
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        return None  # not installed: its backends will say "unavailable", nothing compiles
    package = Path(next(iter(spec.submodule_search_locations)))
    if (package / "data" / "aot" / "trtllm_comm").is_dir():
        return None
    jit_cache = importlib.util.find_spec("flashinfer_jit_cache")
    if jit_cache is not None and jit_cache.submodule_search_locations:
        root = Path(next(iter(jit_cache.submodule_search_locations)))
        if any(root.glob("**/trtllm_comm/*.so")):
            return None
    archs = {sm.replace(".", "") for sm in sms}
    base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE", Path.home())) / ".cache" / "flashinfer"
    for built in base.glob("*/*/cached_ops/trtllm_comm/trtllm_comm.so"):
        if any(arch in built.parent.parent.parent.name for arch in archs):
            return None
    return (
        "FlashInfer has no prebuilt all-reduce kernels for this GPU: its first use compiles them, which "
        "takes several minutes (once; later runs reuse ~/.cache/flashinfer). Progress pauses in 'setup'."
    )


# -- does this node match a profile? (``check``) --------------------------------------------------------

DRIFT_COMPONENTS = ("driver", "cuda_driver", "torch", "nccl", "flashinfer")


@dataclass(frozen=True)
class NodeMatch:
    """``check``'s verdict: hardware differences make the profile foreign; software drift only warns."""

    recorded_fingerprint: str
    current_fingerprint: str
    differences: list[str]  # hardware, "<what> <this node> != <profile>", empty when the node matches
    drift: list[str]  # software, "<component> <profile> -> <this node>"

    @property
    def hardware_match(self) -> bool:
        return self.recorded_fingerprint == self.current_fingerprint


def match_node(profile: Profile, facts: NodeFacts) -> NodeMatch:
    """Compare a profile's node with this one. Pure."""
    recorded = profile.node
    differences = []
    if recorded.fingerprint != facts.fingerprint:
        differences = _hardware_differences(recorded.hardware, facts.hardware) or [
            f"fingerprint {facts.fingerprint[:19]}... != {recorded.fingerprint[:19]}... "
            "(P2P capabilities or PCIe links differ)"
        ]
    drift = [
        f"{name} {recorded.software[name]} -> {facts.software[name]}"
        for name in DRIFT_COMPONENTS
        if recorded.software.get(name)
        and facts.software.get(name)
        and recorded.software[name] != facts.software[name]
    ]
    return NodeMatch(recorded.fingerprint, facts.fingerprint, differences, drift)


def _hardware_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    # The fields a person recognises, most telling first; the fingerprint decides, these explain.
    device_now, device_then = current.get("device", "cuda"), recorded.get("device", "cuda")
    if device_now != device_then:
        return [f"device {device_now} != {device_then}"]  # nothing else compares across devices
    differences = [
        f"{key} {current.get(key, 'unknown')} != {recorded.get(key, 'unknown')}"
        for key in ("interconnect", "gpu_count")
        if current.get(key) != recorded.get(key)
    ]
    # A different GPU count is reported above; compare the GPUs both nodes have.
    for then, now in zip(recorded.get("gpus", []), current.get("gpus", []), strict=False):
        for key in ("model", "sm", "nvlinks", "mig"):
            if then.get(key) != now.get(key):
                differences.append(
                    f"GPU {now.get('index')} {key} {now.get(key, 'unknown')} != {then.get(key, 'unknown')}"
                )
    pairs_then = {tuple(p["gpus"]): p["class"] for p in recorded.get("pairs", [])}
    for pair in current.get("pairs", []):
        then = pairs_then.get(tuple(pair["gpus"]))
        if then is not None and then != pair["class"]:
            differences.append(f"GPU{pair['gpus'][0]}-GPU{pair['gpus'][1]} link {pair['class']} != {then}")
    return differences
