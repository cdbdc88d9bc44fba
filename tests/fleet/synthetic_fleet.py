"""Synthetic fleets built from the real 2x H200 evidence (profiles/h200-x2), labelled synthetic.

A twin of the measured node is one of its two real runs with each cell's rounds resampled (seeded),
so twins differ by the real run-to-run and round-to-round spread and nothing else. A slow node is a
twin whose one backend is made slower at large sizes. Every derived file says so in its provenance.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

H200_X2 = Path(__file__).resolve().parents[2] / "profiles" / "h200-x2"
RUNS = [json.loads((H200_X2 / f"h7168-run{n}.evidence.json").read_text(encoding="utf-8")) for n in (1, 2)]
LARGE = 14 * 1024 * 1024  # "large sizes": 14 MiB and above (the top four sizes measured)


def twin(index: int, *, slow_backend: str | None = None, factor: float = 1.08) -> dict[str, Any]:
    """A synthetic node like the measured one; ``slow_backend`` runs ``factor`` slower at >= 14 MiB."""
    evidence = copy.deepcopy(RUNS[index % 2])
    rng = random.Random(f"twin/{index}")
    for run in evidence["runs"]:
        for result in run["results"]:
            samples = result["samples_us"]
            if samples:
                result["samples_us"] = [rng.choice(samples) for _ in samples]
            if result["backend"] == slow_backend and result["nbytes"] >= LARGE:
                result["samples_us"] = [s * factor for s in result["samples_us"]]
    node = evidence["node"]
    node.pop("capture")  # its GPU UUIDs are the real node's; the profile keeps the recorded topology
    note = f"synthetic: twin {index} of profiles/h200-x2 run {index % 2 + 1}, rounds resampled"
    if slow_backend:
        note += f"; {slow_backend} made {factor - 1:.0%} slower at >= 14 MiB"
    node["provenance"] = {
        "hostname": f"synthetic-{index}",
        "gpu_uuids": [f"GPU-synthetic-{index}-{gpu}" for gpu in range(2)],
        "note": note,
    }
    return evidence
