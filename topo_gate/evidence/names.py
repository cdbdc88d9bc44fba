"""Names in the evidence that its writer (the trials) and its readers (decide, fleet, report) share."""

from __future__ import annotations

from collections.abc import Mapping

#: The baseline every other backend is compared with, per ``trials.device``: what a launcher does
#: when it opts into nothing.
BASELINE_BACKEND: Mapping[str, str] = {"cuda": "nccl", "cpu": "gloo"}
#: The backend name of a layer graph's GEMM alone (a run's ``context`` entries): an all-reduce's
#: in-context cost is its layer graph's time minus this one's.
GEMM = "gemm"
