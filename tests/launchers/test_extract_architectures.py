"""scripts/extract_architectures.py reads each routing class's rule off a release's source: a small
source tree written here holds one architecture per rule (and the near misses each rule must leave
out). With the releases' wheels at hand, every citation of the vLLM route model is checked to name
lines that exist in its release (TOPO_GATE_LAUNCHER_SOURCES, as test_manifests_current.py)."""

from __future__ import annotations

import importlib.util
import os
import zipfile
from pathlib import Path

import pytest

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import vllm as vllm_routes

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "extract_architectures.py"
_spec = importlib.util.spec_from_file_location("extract_architectures", SCRIPT)
assert _spec is not None and _spec.loader is not None
extract_architectures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(extract_architectures)

SOURCE = {
    "vllm/model_executor/models/registry.py": """
_TEXT_GENERATION_MODELS = {
    "LegacyForCausalLM": ("legacy", "LegacyForCausalLM"),
    "DirectForCausalLM": ("vllm.models.direct", "DirectForCausalLM"),
    "AliasForCausalLM": ("vllm.models.direct", "AliasForCausalLM"),
    "MixedForCausalLM": ("vllm.models.mixed", "MixedForCausalLM"),
    "DeferForCausalLM": ("vllm.models.defer", "DeferForCausalLM"),
    "PrivateForCausalLM": ("vllm.models.private", "PrivateForCausalLM"),
    "PlainForCausalLM": ("vllm.models.plain", "PlainForCausalLM"),
}
_SPECULATIVE_DECODING_MODELS = {"DirectMTP": ("vllm.models.direct", "DirectMTP")}
""",
    "vllm/config/vllm.py": """
DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES = frozenset({"MixedForCausalLM", "PlainForCausalLM"})
_CUDA_ONLY = frozenset({"DirectForCausalLM"})

def default_breakable_cudagraph_architectures():
    if current_platform.is_rocm():
        return frozenset({"RocmOnlyForCausalLM"})
    if current_platform.is_cuda():
        return DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES | _CUDA_ONLY
    return DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES
""",
    "vllm/model_executor/layers/fused_allreduce_gemma_rms_norm.py": """
def fused_allreduce_gemma_rms_norm(x):
    return flashinfer_trtllm_fused_allreduce_norm(x)

def forward(x):  # reaches the kernel, but is no wrapper of it by name
    return fused_allreduce_gemma_rms_norm(x)
""",
    "vllm/models/direct/__init__.py": """
from .nvidia.model import DirectForCausalLM
from .nvidia.model import DirectForCausalLM as AliasForCausalLM
from .nvidia.mtp import DirectMTP
""",
    "vllm/models/direct/nvidia/model.py": """
class DirectForCausalLM:
    def norm(self, x):
        return fused_allreduce_gemma_rms_norm(x)
""",
    "vllm/models/direct/nvidia/mtp.py": "class DirectMTP: pass\n",
    "vllm/models/mixed/__init__.py": "from .nvidia.model import MixedForCausalLM\n",
    "vllm/models/mixed/nvidia/model.py": "from vllm.models.mixed.nvidia.runner import run\n",
    "vllm/models/mixed/nvidia/runner.py": """
from vllm.model_executor.layers import fused_allreduce_gemma_rms_norm as fused

def run(x):
    return fused.fused_allreduce_gemma_rms_norm(x)
""",
    "vllm/models/defer/__init__.py": "from .nvidia.model import DeferForCausalLM\n",
    "vllm/models/defer/nvidia/model.py": """
def defers(config):
    return config.compilation_config.pass_config.fuse_allreduce_rms

def norm(x):
    return fused_allreduce_gemma_rms_norm(x)
""",
    "vllm/models/private/__init__.py": "from .nvidia.model import PrivateForCausalLM\n",
    "vllm/models/private/nvidia/model.py": """
FUSED_BOUNDARY_MAX_TOKENS = 16
UNRELATED_MAX_TOKENS = 4096

class PrivateForCausalLM:
    def boundary(self, x):
        from vllm.models.private.nvidia.ops.boundary_all_reduce import mailbox

        return mailbox(x)
""",
    "vllm/models/private/nvidia/ops/boundary_all_reduce.py": "def mailbox(x):\n    return x\n",
    "vllm/models/plain/__init__.py": "from .nvidia.model import PlainForCausalLM\n",
    "vllm/models/plain/nvidia/model.py": """
class PlainForCausalLM:
    def run(self, x):
        return self.forward(x)
""",
}


def test_each_class_is_read_from_the_source_and_the_near_misses_are_left_out() -> None:
    sets = extract_architectures.architectures(SOURCE)
    assert sets == {
        "breakable_cudagraph": ["DirectForCausalLM", "MixedForCausalLM", "PlainForCausalLM"],
        "fused_norm_direct": ["AliasForCausalLM", "DirectForCausalLM"],
        "fused_norm_deferring": ["DeferForCausalLM"],
        "fused_norm_mixed_sites": ["MixedForCausalLM"],
        "model_private_allreduce": {"PrivateForCausalLM": 16},
    }


def test_without_a_cuda_branch_the_last_return_is_the_set() -> None:
    config = SOURCE["vllm/config/vllm.py"].replace("current_platform.is_cuda()", "current_platform.is_xpu()")
    no_cuda = {**SOURCE, "vllm/config/vllm.py": config}
    sets = extract_architectures.architectures(no_cuda)
    assert sets["breakable_cudagraph"] == ["MixedForCausalLM", "PlainForCausalLM"]


SOURCES = os.environ.get("TOPO_GATE_LAUNCHER_SOURCES")


@pytest.mark.skipif(not SOURCES, reason="TOPO_GATE_LAUNCHER_SOURCES not set")
@pytest.mark.parametrize("release", knobs.SUPPORTED["vllm"])
def test_every_citation_names_lines_of_its_own_release(release: str) -> None:
    assert SOURCES is not None
    (wheel,) = Path(SOURCES).glob(f"vllm-{release}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for key, cite in vllm_routes.CITES[release].items():
            if cite.release != f"vllm {release}":
                continue  # torch's, cited at its own version
            length = archive.read(cite.path).decode("utf-8").count("\n")
            for span in cite.lines.split(","):
                low, _, high = span.partition("-")
                assert 1 <= int(low) <= int(high or low) <= length, (key, cite)
