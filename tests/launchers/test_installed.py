"""Reading the installed releases through CMD's own interpreter: real interpreters and real metadata;
every way it cannot be read is an ``Installed(problem=...)`` with a one-line reason, never a guess."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from stand_in_launcher import launcher_venv

from topo_gate.launchers.command.installed import MAX_OUTPUT_BYTES, read_installed
from topo_gate.launchers.command.releases import resolve

MODELLED = {"vllm": "0.33.0", "flashinfer-python": "0.7.2.post1"}


def env_with(*folders: Path, **extra: str) -> dict[str, str]:
    """A CMD environment whose PATH is ``folders`` then the system's (for ``sh``), no user site."""
    path = os.pathsep.join([*(str(f) for f in folders), "/usr/bin", "/bin"])
    return {"PATH": path, "PYTHONNOUSERSITE": "1", **extra}


def script(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def one_line(problem: str | None) -> str:
    assert problem is not None and "\n" not in problem and problem.strip() == problem
    return problem


def test_the_console_scripts_interpreter_answers_from_its_metadata(tmp_path: Path) -> None:
    bin_folder = launcher_venv(tmp_path / "venv", {"vllm": "0.34.0+cu129", "flashinfer-python": "0.7.4"})
    found = read_installed(["vllm", "serve", "M", "-tp", "2"], "vllm", env_with(bin_folder))
    assert found.problem is None
    assert found.versions == {"vllm": "0.34.0+cu129", "flashinfer": "0.7.4", "sglang": None, "trtllm": None}
    assert str(bin_folder / "vllm") in found.where and str(bin_folder / "python") in found.where


def test_python_dash_m_and_env_in_front(tmp_path: Path) -> None:
    bin_folder = launcher_venv(tmp_path / "venv", {"sglang": "0.5.23"}, scripts=())
    cmd = [
        "env",
        f"PATH={bin_folder}",
        "numactl",
        "--interleave=all",
        "python3",
        "-m",
        "sglang.launch_server",
    ]
    # env's PATH=... is CMD's PATH from there on: python3 is the venv's, not this process's.
    found = read_installed(cmd, "sglang", env_with(Path("/nonexistent")) | {"PATH": "/usr/bin:/bin"})
    assert found.problem is None and found.versions["sglang"] == "0.5.23"
    assert "python3 -m sglang.launch_server" in found.where


def test_env_shebang_is_followed_through_cmds_path(tmp_path: Path) -> None:
    bin_folder = launcher_venv(tmp_path / "venv", MODELLED, scripts=())
    script(tmp_path / "tools", "vllm", "#!/usr/bin/env -S python3 -u\nprint('launcher')\n")
    found = read_installed(["vllm", "serve", "M"], "vllm", env_with(tmp_path / "tools", bin_folder))
    assert found.problem is None and found.versions["vllm"] == "0.33.0"


def test_pips_trampoline_for_a_long_interpreter_path(tmp_path: Path) -> None:
    bin_folder = launcher_venv(tmp_path / "venv", MODELLED, scripts=())
    trampoline = f"#!/bin/sh\n'''exec' {bin_folder / 'python'} \"$0\" \"$@\"\n' '''\nprint('launcher')\n"
    script(tmp_path / "tools", "vllm", trampoline)
    found = read_installed(["vllm", "serve", "M"], "vllm", env_with(tmp_path / "tools"))
    assert found.problem is None and found.versions["vllm"] == "0.33.0"


def test_pythonpath_of_cmd_is_searched_as_the_launcher_searches_it(tmp_path: Path) -> None:
    # -I keeps the child from reading PYTHONPATH itself; the script puts it back after its imports.
    bin_folder = launcher_venv(tmp_path / "venv", {}, scripts=("vllm",))
    target = tmp_path / "target" / "vllm-0.34.0.dist-info"
    target.mkdir(parents=True)
    (target / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.34.0\n")
    env = env_with(bin_folder, PYTHONPATH=str(tmp_path / "target"))
    assert read_installed(["vllm", "serve", "M"], "vllm", env).versions["vllm"] == "0.34.0"
    assert read_installed(["vllm", "serve", "M"], "vllm", env_with(bin_folder)).versions["vllm"] is None


def test_the_working_directory_cannot_shadow_the_childs_imports(tmp_path: Path, monkeypatch) -> None:
    bin_folder = launcher_venv(tmp_path / "venv", MODELLED)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "json.py").write_text("raise SystemExit('shadowed')\n")
    found = read_installed(
        ["python", "-m", "vllm.entrypoints.openai.api_server"], "vllm", env_with(bin_folder)
    )
    assert found.problem is None and found.versions["vllm"] == "0.33.0"


@pytest.mark.parametrize(
    ("cmd", "words"),
    [
        (["vllm", "serve", "M"], "vllm: not found on CMD's PATH"),
        (["uv", "run", "vllm", "serve", "M"], "uv run chooses the interpreter itself"),
        (["./serve.sh", "M", "-tp", "2"], "./serve.sh is a wrapper script"),
        (["serve-bin", "M"], "CMD names no vllm console script and no python running it"),
    ],
)
def test_an_interpreter_that_cannot_be_told_is_a_problem(tmp_path: Path, monkeypatch, cmd, words) -> None:
    monkeypatch.chdir(tmp_path)
    script(tmp_path, "serve.sh", '#!/bin/sh\nexec vllm serve "$@"\n')
    found = read_installed(cmd, "vllm", env_with(tmp_path / "empty"))
    assert words in one_line(found.problem) and found.versions == {}


def test_a_non_python_shebang_is_a_problem(tmp_path: Path) -> None:
    script(tmp_path / "bin", "vllm", '#!/bin/bash\nexec /opt/venv/bin/vllm "$@"\n')
    found = read_installed(["vllm", "serve", "M"], "vllm", env_with(tmp_path / "bin"))
    assert "runs on bash, not Python: a wrapper script" in one_line(found.problem)


def stand_in_python(tmp_path: Path, body: str) -> dict[str, str]:
    """A ``vllm`` console script whose interpreter ``python3`` is a shell stand-in doing ``body``."""
    python = script(tmp_path / "bin", "python3", f"#!/bin/sh\n{body}\n")
    script(tmp_path / "bin", "vllm", f"#!{python}\nprint('launcher')\n")
    return env_with(tmp_path / "bin")


def test_a_hanging_child_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    env = stand_in_python(tmp_path, "exec sleep 60")
    started = time.monotonic()
    found = read_installed(["vllm", "serve", "M"], "vllm", env, timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert "did not answer within 0.5 s" in one_line(found.problem)


def test_garbage_output_is_a_problem(tmp_path: Path) -> None:
    env = stand_in_python(
        tmp_path, 'echo \'{"vllm": "0.33.0; rm -rf /", "sglang": null, "trtllm": null, "flashinfer": null}\''
    )
    found = read_installed(["vllm", "serve", "M"], "vllm", env)
    assert "answered with something other than the versions asked for" in one_line(found.problem)
    env = stand_in_python(tmp_path, "echo not json")
    assert "something other than the versions" in one_line(read_installed(["vllm"], "vllm", env).problem)


def test_a_huge_output_is_not_read_past_the_cap(tmp_path: Path) -> None:
    env = stand_in_python(tmp_path, "exec yes")  # never ends: only the cap stops the reading
    started = time.monotonic()
    found = read_installed(["vllm", "serve", "M"], "vllm", env)
    assert time.monotonic() - started < 5
    assert f"printed more than {MAX_OUTPUT_BYTES} bytes" in one_line(found.problem)


def test_a_failing_child_is_a_problem(tmp_path: Path) -> None:
    env = stand_in_python(tmp_path, 'echo \'{"vllm": "0.33.0"}\'; exit 3')
    assert "failed (exit 3)" in one_line(read_installed(["vllm", "serve", "M"], "vllm", env).problem)


def test_what_is_read_resolves_to_a_release(tmp_path: Path) -> None:
    # The reading feeds releases.resolve: modelled releases plan, others are refused naming both.
    modelled = launcher_venv(tmp_path / "a", MODELLED)
    newer = launcher_venv(tmp_path / "b", {**MODELLED, "vllm": "0.35.0"})
    planned = resolve("vllm", read_installed(["vllm", "serve", "M"], "vllm", env_with(modelled)), environ={})
    assert planned.refusal is None and planned.release == "0.33.0" and planned.flashinfer == "0.7.2.post1"
    refused = resolve("vllm", read_installed(["vllm", "serve", "M"], "vllm", env_with(newer)), environ={})
    assert (
        refused.refusal is not None
        and "vLLM 0.35.0 installed" in refused.refusal
        and "0.33.0" in refused.refusal
    )
