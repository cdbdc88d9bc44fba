"""The ``bench`` fixture: the stand-in benchmark in a fresh folder; the knob cases' profiles, written
once per session (see ab_helpers)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# The launcher tests' profile builders (priced_profiles, knob_cases), as the plugin tests use them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launchers"))

from ab_helpers import CASE_FOR, Bench, PricedNode  # noqa: E402
from knob_cases import BY_NAME  # noqa: E402


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Bench:
    monkeypatch.chdir(tmp_path)
    return Bench(tmp_path, monkeypatch)


@pytest.fixture(scope="session")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], PricedNode]:
    """``priced(case_name)``: the knob case's profile, written on first use and kept for the session."""
    folder = tmp_path_factory.mktemp("priced-profiles")
    written: dict[str, PricedNode] = {}

    def node(name: str) -> PricedNode:
        if name not in written:
            case = BY_NAME[name]
            written[name] = PricedNode(case, case.write(folder / f"{name}.yaml"))
        return written[name]

    return node


@pytest.fixture(scope="session")
def sglang_node(priced: Callable[[str], PricedNode]) -> PricedNode:
    return priced(CASE_FOR["sglang"])


@pytest.fixture(scope="session")
def vllm_node(priced: Callable[[str], PricedNode]) -> PricedNode:
    return priced(CASE_FOR["vllm"])


@pytest.fixture(scope="session")
def trtllm_node(priced: Callable[[str], PricedNode]) -> PricedNode:
    return priced(CASE_FOR["trtllm"])


@pytest.fixture
def trtllm_user_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's env a TRT-LLM plan needs (ab reads it from this process): with the autotuner on,
    TRT-LLM's AUTO strategy is tuned at warm-up, never measured, so no plan replaces it."""
    monkeypatch.setenv("TLLM_DISABLE_ALLREDUCE_AUTOTUNE", "1")
