"""Before any trial, a JIT build the run needs and this machine cannot run refuses the backends that
need it, saying what is missing: SGLang v2's kernels with an empty JIT cache and no nvcc or no host
compiler; nothing is refused where both tools are found."""

from __future__ import annotations

import stat
from pathlib import Path

from topo_gate.probe.jit import jit_refusals, missing_toolchain


def _tool(folder: Path, name: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _environ(tmp_path: Path, *tools: str) -> dict[str, str]:
    """A PATH holding only ``tools``, a CUDA_HOME without nvcc, and an empty SGLang JIT cache."""
    bin_dir, home, cache = tmp_path / "bin", tmp_path / "cuda", tmp_path / "jit"
    for folder in (bin_dir, home / "bin", cache):
        folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        _tool(bin_dir, tool)
    return {"PATH": str(bin_dir), "CUDA_HOME": str(home), "SGLANG_JIT_CACHE_DIR": str(cache)}


def test_no_nvcc_refuses_sglang_v2_and_says_what_is_missing(tmp_path) -> None:
    environ = _environ(tmp_path, "c++")
    assert missing_toolchain(environ) == ["nvcc (CUDA toolkit: set CUDA_HOME or put nvcc on PATH)"]
    reasons = jit_refusals(["nccl", "custom_v2_sglang", "custom_v2_sglang+rmsnorm"], ["9.0"], environ)
    assert set(reasons) == {"custom_v2_sglang", "custom_v2_sglang+rmsnorm"}
    assert reasons["custom_v2_sglang"].startswith(
        "SGLang v2's kernels are compiled on first use and cannot be here: no nvcc"
    )
    assert "SGLANG_JIT_CACHE_DIR" in reasons["custom_v2_sglang"]


def test_no_host_compiler_is_named(tmp_path) -> None:
    environ = _environ(tmp_path)
    _tool(Path(environ["CUDA_HOME"]) / "bin", "nvcc")
    assert missing_toolchain(environ) == ["a host C++ compiler (c++ not found; set CXX)"]
    assert missing_toolchain({**environ, "CXX": str(Path(environ["CUDA_HOME"]) / "bin" / "nvcc")}) == []


def test_a_toolchain_or_a_filled_cache_refuses_nothing(tmp_path) -> None:
    environ = _environ(tmp_path, "c++")
    _tool(Path(environ["CUDA_HOME"]) / "bin", "nvcc")
    assert jit_refusals(["custom_v2_sglang"], ["9.0"], environ) == {}
    bare = _environ(tmp_path / "bare")
    (Path(bare["SGLANG_JIT_CACHE_DIR"]) / "custom_all_reduce").mkdir()
    assert jit_refusals(["custom_v2_sglang"], ["9.0"], bare) == {}
