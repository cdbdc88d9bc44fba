"""A launcher environment on disk: a real Python venv (no pip) whose site-packages hold the distribution
metadata of the releases a test names, and console scripts (``vllm``, ``sglang``, ``trtllm-serve``)
whose shebang is that venv's interpreter, as pip writes them.

What ``topo_gate.launchers.command.installed`` reads is then a real interpreter answering from real
``.dist-info`` folders; the console script's body is the test's stand-in for the launcher (it prints
its argv and the launcher env, as ``test_exec_cli``'s reporter does).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: Stands in for a launcher: reports its argv and the env topo-gate sets.
REPORTER = """import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "pid": os.getpid(),
                  "env": {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "SGLANG_", "TOPO_GATE_"))}}))
"""


def launcher_venv(
    folder: Path,
    versions: Mapping[str, str],
    scripts: tuple[str, ...] = ("vllm",),
    modules: tuple[str, ...] = (),
) -> Path:
    """A venv at ``folder`` holding ``versions`` (distribution name -> version) as installed metadata,
    with each of ``scripts`` a console script on its interpreter and each of ``modules`` (dotted) a
    module ``python -m`` runs; its ``bin`` folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next((folder / "lib").glob("python*/site-packages"))
    for name, version in versions.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for dotted in modules:
        package = site
        for part in dotted.split(".")[:-1]:
            package = package / part
            package.mkdir(exist_ok=True)
            (package / "__init__.py").touch()
        (package / f"{dotted.rsplit('.', 1)[-1]}.py").write_text(REPORTER)
    bin_folder = folder / "bin"
    for script in scripts:
        path = bin_folder / script
        path.write_text(f"#!{bin_folder / 'python'}\n{REPORTER}")
        path.chmod(0o755)
    return bin_folder
