"""The bundled 2x H200 evidence (run 1), with one measurement it lacks: the SGLang FlashInfer kernels'
size transition right after a 2048-token message, written as a v1.2 probe writes it (``after_sizes``
on each smaller result, ascending, the after-8192 replay kept as the largest entry).

The bundled run timed those kernels' transitions only after the largest size (8192 tokens: ~930 us
at 1 token). The figures added here are the ones the same run measured for the same kernel family
after 2048 tokens: vLLM's fused one-shot (``trtllm_fused_oneshot_vllm``, whose ladder ends at 2048
tokens), ~239 us at 1 token. That is the measurement issue-level planning needs; a re-probe with
evidence v1.2 on this node records the real one.
"""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path
from typing import Any

from topo_gate.evidence.check import evidence_problem
from topo_gate.probe import DecideSettings, build_profile
from topo_gate.profile import Profile

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json"
TOKENS_2048 = 2048
#: The kernels SGLang's FlashInfer workspace runs (plain and fused one-shot), and where their
#: after-2048 figures come from.
SGLANG_KERNELS = {
    "allreduce": "trtllm_oneshot_sglang",
    "allreduce_rmsnorm": "trtllm_fused_oneshot_sglang",
}
SOURCE = ("allreduce_rmsnorm", "trtllm_fused_oneshot_vllm")


def bundled_evidence() -> dict[str, Any]:
    return json.loads(EVIDENCE.read_text())


def _extra_after(run: dict[str, Any], backend: str) -> dict[int, float]:
    """Per token count, the extra us of one replay right after the largest size (v1.1's figure)."""
    out = {}
    for result in run["results"]:
        if result["backend"] == backend and result.get("after_larger_us") and result["samples_us"]:
            steady = statistics.median(result["samples_us"])
            after = statistics.median(result["after_larger_us"])
            out[result["tokens"]] = (after - steady) * result["graph_calls"]
    return out


def with_after_2048(evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    """``evidence`` (default: the bundled run 1) with the SGLang kernels' after-2048 transitions."""
    document = copy.deepcopy(evidence or bundled_evidence())
    runs = {run["pattern"]: run for run in document["runs"]}
    source = _extra_after(runs[SOURCE[0]], SOURCE[1])
    for pattern, backend in SGLANG_KERNELS.items():
        run = runs[pattern]
        after_bytes = next(r["nbytes"] for r in run["results"] if r["tokens"] == TOKENS_2048)
        largest = max(r["nbytes"] for r in run["results"] if r["backend"] == backend and r["samples_us"])
        for result in run["results"]:
            if result["backend"] != backend or result["tokens"] not in source:
                continue
            if not result["samples_us"] or not result.get("after_larger_us"):
                continue
            per_call = source[result["tokens"]] / result["graph_calls"]
            entries = [
                {
                    "after_nbytes": after_bytes,
                    "samples_us": [round(s + per_call, 6) for s in result["samples_us"]],
                }
            ]
            if largest > after_bytes:
                entries.append({"after_nbytes": largest, "samples_us": result["after_larger_us"]})
            result["after_sizes"] = entries
    document["format"] = "topo-gate/evidence/v1.2"
    problem = evidence_problem(document)
    assert problem is None, problem
    return document


def profile_of(evidence: dict[str, Any]) -> Profile:
    profile, _ = build_profile(evidence, None, DecideSettings())
    return profile.with_digest()
