"""SYNTHETIC evidence for the example profiles: made-up numbers, shaped like real runs, never measured.

    python scripts/synthetic_evidence.py            # writes both evidence files and their profiles

Each example node gets an evidence file (format v1.2: transitions after every larger size, layer
graphs for the launchers' default paths, a shared worker session) built from a small latency model,
and its profile is derived from it exactly as from a real node's evidence (``topo-gate decide
EVIDENCE --out PROFILE``, dated like the evidence so that a rerun changes no file), so the decisions
and the price table agree with each other:

- ``synthetic-h200x2``: 2x H200 on NVSwitch, hidden 7168: TRT-LLM one-shot wins the small sizes,
  two-shot the middle ones, NCCL the largest; the fused kernels likewise for all-reduce + RMSNorm.
- ``synthetic-rtxpro6000-pcie-x4``: 4x RTX PRO 6000 (SM 12.0, PCIe only), hidden 5120 -- the seed
  lesson: at TP2 (one PCIe switch) FlashInfer's PCIe IPC and vLLM's custom all-reduce win and the
  fused one-shot wins the smallest sizes; at TP4 (across the host bridge) every fast path is slower
  than NCCL, and vLLM's custom all-reduce is refused above TP2 without NVLink.

The model (microseconds per call, ``n`` bytes): NCCL ``a + n / bandwidth``; each fast path NCCL's
time divided by a speed-up per ladder size; a fused kernel its one-shot's time plus a little, a
composite the plain path plus the RMSNorm kernel; a Lamport-style backend pays ``2 + 4 sqrt(L / 1
MiB)`` us on the first replay after a larger size ``L``; in a layer graph the GEMM (launch-bound,
then linear in tokens) comes first and the all-reduce runs a little slower beside it. Samples scatter
around the model by a seeded 0.02 us + 0.05% (per name and size), so the files are the same on every machine.
Backends not faster than NCCL stop after 5 rounds, as the worker stops them.

Which backend runs where is not made up: every name passes the trial backends' own admission
(``topo_gate.trials.backends``: the whole-run rules of the TRT-LLM kernels, vLLM's custom
all-reduce and FlashInfer's PCIe IPC, and the TRT-LLM per-size rules, the launchers' one/two-shot
choice among them), imported, not copied, so an example profile holds only what a real probe of
that node could write. On SM 12.0 that refuses the fused all-reduce + RMSNorm kernels, as a real
trial does; the per-size rules of PCIe IPC and vLLM's custom all-reduce read FlashInfer's launch
policy or a live context and pass every size here.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402, TID251 -- the trial backends' admission rules below take a torch dtype

from topo_gate.evidence.bar import STEP_CALLS  # noqa: E402
from topo_gate.profile.schema import FUSED_PATTERN  # noqa: E402
from topo_gate.trials.backends import load_backend  # noqa: E402
from topo_gate.trials.backends.launch_styles import STYLES  # noqa: E402
from topo_gate.trials.backends.names import is_composite, plain_of  # noqa: E402
from topo_gate.trials.backends.pcie_ipc import pcie_ipc_unavailable  # noqa: E402
from topo_gate.trials.backends.trtllm import (  # noqa: E402
    launcher_picks_oneshot,
    trtllm_size_unavailable,
    trtllm_unavailable,
)
from topo_gate.trials.backends.vllm_custom import vllm_custom_unavailable  # noqa: E402

EXAMPLES = REPO / "profiles" / "examples"
ROUNDS, EARLY_ROUNDS, GRAPH_CALLS, TRANSITION_REPS, MARGIN = 15, 5, 32, 3, 0.05
NOISE, NOISE_US = 0.0005, 0.02
LAMPORT = ("trtllm_",)  # the FlashInfer TRT-LLM kernels (plain, fused, every launcher's variant)
NORM = "+rmsnorm"
DTYPE = torch.bfloat16  # the trials' dtype (evidence "dtype")


@dataclass(frozen=True)
class Run:
    """One synthetic run: the model of every backend at each ladder size."""

    tp: int
    group: tuple[int, ...]
    group_class: str
    pattern: str
    hidden: int
    tokens: tuple[int, ...]
    nccl_us: Callable[[int], float]  # bytes -> NCCL's (or NCCL + norm's) us per call
    speedups: Mapping[str, Sequence[float | None]]  # over NCCL per size; None: unavailable there
    # Backends refused outright: why, or None where the trial backends' own admission says why.
    unavailable: Mapping[str, str | None] = field(default_factory=dict)
    gemm_us: Callable[[int], float] = lambda tokens: 6.0 + 0.05 * tokens
    context_backends: tuple[str, ...] = ()
    session: str | None = None


def _norm_us(nbytes: int) -> float:
    return 2.0 + nbytes / 1e6


def _fused(
    plain: Sequence[float | None], nccl: Callable[[int], float], sizes: Sequence[int]
) -> list[float | None]:
    """A fused kernel's speed-up over NCCL + norm: its one-shot's time, plus a little norm math."""
    out: list[float | None] = []
    for speedup, nbytes in zip(plain, sizes, strict=True):
        if speedup is None:
            out.append(None)
            continue
        fused = nccl(nbytes) / speedup + 0.2 + nbytes / 4e6
        out.append((nccl(nbytes) + _norm_us(nbytes)) / fused)
    return out


def _composite(
    plain: Sequence[float | None], nccl: Callable[[int], float], sizes: Sequence[int]
) -> list[float | None]:
    """A plain path + the norm kernel, as a speed-up over NCCL + the same norm."""
    return [
        None if s is None else (nccl(n) + _norm_us(n)) / (nccl(n) / s + _norm_us(n))
        for s, n in zip(plain, sizes, strict=True)
    ]


def h200x2() -> tuple[dict[str, Any], list[Run]]:
    tokens = tuple(1 << k for k in range(12))  # 1..2048
    sizes = [t * 7168 * 2 for t in tokens]

    def nccl(n: int) -> float:
        return 7.8 + n / 94e3

    plain = {
        "trtllm_oneshot": [2.9, 2.9, 2.85, 2.8, 2.6, 2.2, 1.4, 1.25, 1.15, 1.1, 0.95, 0.8],
        "trtllm_twoshot": [None, None, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.55, 1.35, 1.02, 0.9],
    }
    fused = {
        name.replace("trtllm_", "trtllm_fused_"): _fused(values, nccl, sizes)
        for name, values in plain.items()
    }
    composites = {name + NORM: _composite(values, nccl, sizes) for name, values in plain.items()}
    node = _node(
        "39a39c834186693d4ed92a86c23d53f2b83e5d74ac2c8d56b5fc475f6ace797c",
        [_gpu(i, "NVIDIA H200", "9.0", nvlinks=18) for i in range(2)],
        "nvswitch",
        {"2": [{"gpus": [0, 1], "class": "nvswitch"}]},
        "2x H200 on NVSwitch",
    )
    runs = [
        Run(2, (0, 1), "nvswitch", "allreduce", 7168, tokens, nccl, plain, session="tp2-gpus-0-1"),
        Run(2, (0, 1), "nvswitch", "allreduce_rmsnorm", 7168, tokens, lambda n: nccl(n) + _norm_us(n),
            {**fused, **composites}, session="tp2-gpus-0-1"),
    ]  # fmt: skip
    return node, runs


def rtxpro6000_pcie_x4() -> tuple[dict[str, Any], list[Run]]:
    tokens = tuple(1 << k for k in range(11))  # 1..1024
    sizes = [t * 5120 * 2 for t in tokens]

    def nccl2(n: int) -> float:
        return 14.0 + n / 24e3

    def nccl4(n: int) -> float:
        return 18.0 + n / 16e3

    oneshot_sglang = [1.9, 1.9, 1.85, 1.8, 1.7, 1.35, 1.1, 0.95, 0.85, 0.75, 0.7]
    tp2 = {
        "trtllm_oneshot": [s * 0.97 for s in oneshot_sglang],
        "trtllm_twoshot": [None, None, 1.0, 1.02, 1.05, 1.02, 0.98, 0.92, 0.88, 0.82, 0.78],
        "trtllm_oneshot_vllm": [s * 0.99 for s in oneshot_sglang],
        "trtllm_oneshot_sglang": oneshot_sglang,
        "vllm_custom": [1.5, 1.5, 1.5, 1.48, 1.45, 1.42, 1.38, 1.3, 1.2, 1.14, 1.1],
        "pcie_ipc": [2.05, 2.05, 2.0, 1.95, 1.85, 1.35, 1.15, 1.0, 0.9, 0.8, 0.75],
    }
    tp4 = {
        "trtllm_oneshot": [0.85, 0.85, 0.8, 0.78, 0.72, 0.65, 0.58, 0.5, 0.45, 0.42, 0.4],
        "trtllm_twoshot": [None, None, None, 0.7, 0.7, 0.68, 0.62, 0.58, 0.52, 0.48, 0.45],
        # FlashInfer's rule (both launchers') runs two-shot at 1024 tokens on TP 4.
        "trtllm_oneshot_vllm": [0.84, 0.84, 0.79, 0.77, 0.71, 0.64, 0.57, 0.5, 0.45, 0.42, None],
        "trtllm_oneshot_sglang": [0.85, 0.85, 0.8, 0.78, 0.72, 0.65, 0.58, 0.5, 0.45, 0.42, None],
        "pcie_ipc": [0.9, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5, 0.45, 0.4, 0.4],
    }
    refused = {
        "symm_mem_twoshot_vllm": "SYNTHETIC: torch symmetric memory needs peer access this model node lacks",
    }
    tp4_refused = {**refused, "vllm_custom": None}

    def fused_of(plain: Mapping[str, Sequence[float | None]], nccl: Callable[[int], float]) -> dict[str, Any]:
        names = ("trtllm_oneshot", "trtllm_twoshot", "trtllm_oneshot_vllm", "trtllm_oneshot_sglang")
        fused = {name.replace("trtllm_", "trtllm_fused_"): _fused(plain[name], nccl, sizes) for name in names}
        composites = {name + NORM: _composite(values, nccl, sizes) for name, values in plain.items()}
        return {**fused, **composites}

    def tp4_gemm(t: int) -> float:
        return 5.0 + 0.035 * t

    node = _node(
        "5c" * 32,
        [_gpu(i, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", nvlinks=0) for i in range(4)],
        "pcie-hostbridge",
        {
            "2": [{"gpus": [0, 1], "class": "pcie-switch"}, {"gpus": [2, 3], "class": "pcie-switch"}],
            "4": [{"gpus": [0, 1, 2, 3], "class": "pcie-hostbridge"}],
        },
        "4x RTX PRO 6000 (SM 12.0, PCIe only; GPUs 0-1 and 2-3 on one switch each)",
    )
    runs = [
        Run(2, (0, 1), "pcie-switch", "allreduce", 5120, tokens, nccl2, tp2, refused, lambda t: 5.0 + 0.07 * t,
            ("vllm_custom",), "tp2-gpus-0-1"),
        Run(2, (0, 1), "pcie-switch", "allreduce_rmsnorm", 5120, tokens, lambda n: nccl2(n) + _norm_us(n),
            fused_of(tp2, nccl2), {}, lambda t: 5.0 + 0.07 * t, ("vllm_custom+rmsnorm",), "tp2-gpus-0-1"),
        Run(4, (0, 1, 2, 3), "pcie-hostbridge", "allreduce", 5120, tokens, nccl4, tp4, tp4_refused, tp4_gemm),
        Run(4, (0, 1, 2, 3), "pcie-hostbridge", "allreduce_rmsnorm", 5120, tokens,
            lambda n: nccl4(n) + _norm_us(n), fused_of(tp4, nccl4), {}, tp4_gemm),
    ]  # fmt: skip
    return node, runs


def _gpu(index: int, model: str, sm: str, *, nvlinks: int) -> dict[str, Any]:
    return {
        "index": index,
        "model": model,
        "sm": sm,
        "pcie": {"gen": 5, "width": 16},
        "nvlinks": nvlinks,
        "mig": False,
    }


def _node(
    fingerprint: str, gpus: list[dict[str, Any]], interconnect: str, tp_groups: dict[str, Any], what: str
) -> dict[str, Any]:
    """The example node: a made-up fingerprint (no capture to rebuild one from) and its classes."""
    return {
        "fingerprint": f"sha256:{fingerprint}",
        "hardware": {"gpus": gpus, "interconnect": interconnect, "tp_groups": tp_groups},
        "software": {"driver": "580.159.04", "cuda_driver": "13.0", "torch": "2.11.0", "nccl": "2.28.9",
                     "flashinfer": "0.7.2.post1", "python": "3.12.3"},
        "provenance": {
            "synthetic": True,
            "note": f"SYNTHETIC: {what}; numbers from scripts/synthetic_evidence.py's latency model, "
            "not measured on any node; do not deploy.",
            "hostname": None,
            "gpu_uuids": [],
            "command": "python scripts/synthetic_evidence.py",
        },
    }  # fmt: skip


def _samples(rng: random.Random, median: float, count: int) -> list[float]:
    spread = NOISE_US + NOISE * median  # launch jitter, then a small share of the time itself
    return [round(median + spread * rng.gauss(0, 1), 4) for _ in range(count)]


def _lamport(name: str) -> bool:
    return name.startswith(LAMPORT)


def _transition_us(after: int) -> float:
    return 2.0 + 4.0 * math.sqrt(after / (1 << 20))


def _run_refusal(run: Run, name: str, sm: int) -> str | None:
    """Why the trial worker would refuse backend ``name`` for the whole run, by its own rules."""
    plain = plain_of(name) if is_composite(name) else name
    if plain in STYLES:
        # A composite runs its plain kernel in the allreduce pattern: only a fused name is fused.
        fused = not is_composite(name) and run.pattern == FUSED_PATTERN
        return trtllm_unavailable(sm=sm, world_size=run.tp, hidden=run.hidden, dtype=DTYPE, fused=fused)
    if plain == "vllm_custom":
        return vllm_custom_unavailable(world_size=run.tp, group_class=run.group_class, dtype=DTYPE)
    if plain == "pcie_ipc":
        return pcie_ipc_unavailable(world_size=run.tp, dtype=DTYPE)
    return None


def _size_refusal(run: Run, name: str, sm: int, tokens: int) -> str | None:
    """Why the worker would skip ``name`` at ``tokens``: a TRT-LLM kernel's own preconditions and
    the launcher's one/two-shot rule, which admits each variant only where the launcher runs it."""
    plain = plain_of(name) if is_composite(name) else name
    if plain not in STYLES:
        return None
    oneshot = load_backend(plain).oneshot  # type: ignore[attr-defined]
    picks = launcher_picks_oneshot(
        STYLES[plain].rule, tokens=tokens, hidden=run.hidden, itemsize=DTYPE.itemsize,
        world_size=run.tp, sm=sm,
    )  # fmt: skip
    if picks is not None and picks != oneshot:
        return f"the launcher's {STYLES[plain].rule} rule runs {'one-shot' if picks else 'two-shot'} at this size"
    return trtllm_size_unavailable(
        tokens=tokens, world_size=run.tp, hidden=run.hidden, dtype=DTYPE, max_tokens=max(run.tokens),
        oneshot=oneshot,
    )  # fmt: skip


def _results(
    run: Run, key: str, sm: int
) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, dict[str, Any]]]:
    sizes = [t * run.hidden * 2 for t in run.tokens]
    results, medians, outcomes = [], {}, {"nccl": {"status": "ok", "reason": None}}
    for index, (tokens, nbytes) in enumerate(zip(run.tokens, sizes, strict=True)):
        base = run.nccl_us(nbytes)
        results.append(_cell(run, key, "nccl", tokens, nbytes, base, ROUNDS))
        medians[("nccl", nbytes)] = base
        for name, speedups in run.speedups.items():
            if _run_refusal(run, name, sm) is not None:
                continue
            outcomes[name] = {"status": "ok", "reason": None}
            speedup = speedups[index]
            why = _size_refusal(run, name, sm, tokens)
            if (why is None) != (speedup is not None):
                raise ValueError(
                    f"{key} TP {run.tp} {name} at {tokens} tokens: the latency model and "
                    f"the trials' admission disagree ({why or 'admitted'})"
                )
            if speedup is None:  # refused at this size: ``why`` says why
                results.append(
                    _cell(run, key, name, tokens, nbytes, None, 0, status="unavailable", reason=why)
                )
                continue
            median = base / speedup
            rounds = ROUNDS if median < base else EARLY_ROUNDS  # a loser stops after the early rounds
            results.append(_cell(run, key, name, tokens, nbytes, median, rounds, stopped=rounds < ROUNDS))
            medians[(name, nbytes)] = median
    for name in run.speedups:
        reason = _run_refusal(run, name, sm)
        if reason is not None:
            outcomes[name] = {"status": "unavailable", "reason": reason}
    for name, given in run.unavailable.items():
        outcomes[name] = {"status": "unavailable", "reason": given or _run_refusal(run, name, sm)}
    _add_transitions(run, key, results, sizes)
    return results, medians, outcomes


def _cell(run: Run, key: str, name: str, tokens: int, nbytes: int, median: float | None, rounds: int,
          *, status: str = "ok", reason: str | None = None, stopped: bool = False) -> dict[str, Any]:  # fmt: skip
    rng = random.Random(f"{key}/{run.tp}/{run.pattern}/{name}/{tokens}")
    samples = [] if median is None else _samples(rng, median, rounds)
    faster_rank = [round(s * (1 - 0.01 * rng.random()), 4) for s in samples]
    cell = {
        "backend": name,
        "tokens": tokens,
        "nbytes": nbytes,
        "status": status,
        "reason": reason,
        "samples_us": samples,
        "per_rank_us": [samples, *([faster_rank] * (run.tp - 1))],
        "skew_us": [round(0.05 + 0.1 * rng.random(), 3) for _ in samples],
        "graph_calls": GRAPH_CALLS,
        "max_abs_err": None if median is None else (0.0 if run.pattern == "allreduce" else 0.0078),
    }
    if stopped:
        cell["stopped_early"] = True
    return cell


def _add_transitions(run: Run, key: str, results: list[dict[str, Any]], sizes: Sequence[int]) -> None:
    """A Lamport-style backend's replays right after every larger size it ran (evidence v1.2)."""
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for cell in results:
        if cell["samples_us"]:
            by_backend.setdefault(cell["backend"], []).append(cell)
    for name, cells in by_backend.items():
        if not _lamport(name):
            continue
        timed = [cell["nbytes"] for cell in cells]
        for cell in cells[:-1]:
            rng = random.Random(f"{key}/{run.tp}/{run.pattern}/{name}/{cell['tokens']}/after")
            steady = sorted(cell["samples_us"])[len(cell["samples_us"]) // 2]
            cell["after_sizes"] = [
                {"after_nbytes": after, "samples_us": _samples(rng, steady + _transition_us(after) / GRAPH_CALLS, TRANSITION_REPS)}
                for after in timed
                if after > cell["nbytes"]
            ]  # fmt: skip
            cell["after_larger_us"] = cell["after_sizes"][-1]["samples_us"]


def _context(run: Run, key: str, medians: Mapping[tuple[str, int], float]) -> list[dict[str, Any]]:
    """Layer graphs where the worker times them: the baseline, the GEMM, every backend that cleared
    the isolated bar (transition-charged, decide rule 5) and the default paths."""
    entries = []
    for tokens in run.tokens:
        nbytes = tokens * run.hidden * 2
        base = medians[("nccl", nbytes)]
        gemm = run.gemm_us(tokens)
        chosen = ["nccl", *run.context_backends]
        for name in run.speedups:
            median = medians.get((name, nbytes))
            if median is None:
                continue  # refused at this size, or for the whole run
            charge = (
                _transition_us(max(n for (b, n) in medians if b == name)) / STEP_CALLS
                if _lamport(name)
                else 0.0
            )
            if median is not None and base / (median + charge) >= 1 + MARGIN and name not in chosen:
                chosen.append(name)
        for name in ["gemm", *chosen]:
            median = medians.get((name, nbytes))
            if name != "gemm" and median is None:
                continue  # a default path not admitted at this size
            rng = random.Random(f"{key}/{run.tp}/{run.pattern}/context/{name}/{tokens}")
            layer = gemm if name == "gemm" else gemm + median * (1.08 if name == "nccl" else 1.12)
            entries.append(
                {
                    "backend": name,
                    "tokens": tokens,
                    "nbytes": nbytes,
                    "samples_us": _samples(rng, layer, ROUNDS),
                }
            )
    return entries  # fmt: skip


def evidence(name: str) -> dict[str, Any]:
    """The synthetic evidence document of example ``name`` (``synthetic-h200x2``, ...)."""
    node, runs = EXAMPLES_BY_NAME[name]()
    major, minor = node["hardware"]["gpus"][0]["sm"].split(".")
    sm = int(major) * 10 + int(minor)
    documents = []
    for run in runs:
        results, medians, outcomes = _results(run, name, sm)
        document = {
            "tp": run.tp,
            "group": list(run.group),
            "group_class": run.group_class,
            "pattern": run.pattern,
            "wall_s": 14.2 if run.tp == 2 else 19.6,
            "phases_s": {"setup": 5.1, "check": 0.7, "capture": 1.2, "measure": 5.3, "transition": 0.9, "context": 1.0},
            "backends": outcomes,
            "results": results,
            "error": None,
            "retries": [],
            "context": _context(run, name, medians),
            "graph_checks": [],
            "context_backends": list(run.context_backends),
        }  # fmt: skip
        if run.session:
            patterns = [r.pattern for r in runs if r.session == run.session]
            document["session"] = {"id": run.session, "patterns": patterns, "wall_s": 31.5,
                                   "phases_s": {"import": 4.9, "rendezvous": 1.3, "admit": 0.3}}  # fmt: skip
        documents.append(document)
    patterns = sorted({run.pattern for run in runs})
    hidden = runs[0].hidden
    tps = sorted({run.tp for run in runs})
    gpus = len(node["hardware"]["gpus"])
    skipped = [{"tp": tp, "reason": f"node has {gpus} usable GPUs"} for tp in (2, 4, 8) if tp > gpus]
    return {
        "format": "topo-gate/evidence/v1.2",
        "created": "2026-11-30T08:00:00Z",
        "tool": {"name": "topo-gate", "version": "0.1.0"},
        "node": node,
        "trials": {"dtype": "bfloat16", "hidden": hidden, "tp": tps, "patterns": patterns,
                   "method": {"graph_calls": GRAPH_CALLS, "rounds": ROUNDS, "warmup": 3}, "device": "cuda"},
        "skipped": skipped,
        "runs": documents,
        "budget": {"seconds": None, "dropped": []},
    }  # fmt: skip


EXAMPLES_BY_NAME: dict[str, Callable[[], tuple[dict[str, Any], list[Run]]]] = {
    "synthetic-h200x2": h200x2,
    "synthetic-rtxpro6000-pcie-x4": rtxpro6000_pcie_x4,
}


def main() -> None:
    from dataclasses import replace

    from topo_gate.evidence.document import load_evidence
    from topo_gate.probe import DecideSettings, build_profile
    from topo_gate.profile import EvidenceRef, dump_profile

    for name in EXAMPLES_BY_NAME:
        path = EXAMPLES / f"{name}.evidence.json"
        path.write_text(json.dumps(evidence(name), indent=1) + "\n", encoding="utf-8")
        # What `topo-gate decide EVIDENCE --out PROFILE` writes, dated like the evidence rather than
        # today, so that running this again changes no file.
        loaded = load_evidence(path)
        reference = EvidenceRef(path.name, "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest())
        profile, notes = build_profile(loaded, reference, DecideSettings())
        out = dump_profile(replace(profile, created=loaded["created"]), EXAMPLES / f"{name}.yaml")
        print(f"{path.relative_to(REPO)} -> {out.relative_to(REPO)}")
        for note in notes:
            print(f"  note: {note}")


if __name__ == "__main__":
    main()
