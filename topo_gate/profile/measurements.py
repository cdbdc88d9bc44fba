"""Profile v1.3 measurement tables (development copy of the shared contract; replaced on merge)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Transition:
    after_bytes: tuple[int, ...]
    cost_us: tuple[tuple[float | None, ...], ...]


@dataclass(frozen=True)
class BackendPrices:
    status: tuple[str, ...]
    median_us: tuple[float | None, ...]
    ci_us: tuple[tuple[float, float] | None, ...]
    in_context_us: tuple[float | None, ...] | None = None
    in_context_ci_us: tuple[tuple[float, float] | None, ...] | None = None
    transition: Transition | None = None


@dataclass(frozen=True)
class Measurement:
    tp: int
    group: tuple[int, ...]
    group_class: str
    pattern: str
    hidden: int
    dtype: str
    sizes: tuple[int, ...]
    backends: Mapping[str, BackendPrices]
