"""The pure topology modules import nothing heavy; only nvml.py (lazily) touches pynvml."""

from __future__ import annotations

import subprocess
import sys


def test_pure_modules_import_no_binding_and_no_ui() -> None:
    code = (
        "import sys\n"
        "import topo_gate.topology.capture, topo_gate.topology.model, topo_gate.topology.classify\n"
        "import topo_gate.topology.fingerprint, topo_gate.topology.software, topo_gate.topology.nvml\n"
        "print(sorted(m for m in ('pynvml', 'torch', 'click', 'rich') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_software_block_reads_versions_without_importing_torch() -> None:
    code = (
        "import sys\n"
        "from topo_gate.topology.software import python_versions\n"
        "v = python_versions()\n"
        "print('torch' in sys.modules, v['python'] == '.'.join(map(str, sys.version_info[:3])), v['torch'] is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True"]  # torch is installed in the dev venv, not imported
