"""The plugins without a launcher installed: idle when unset, never raise, the launcher's default on
any error (NCCL under ``TOPO_GATE_FALLBACK=nccl``), inherit.

These run in the main test venv. tests/plugins/test_real_launchers.py drives the same plugins through
the real SGLang and vLLM releases (scripts/launcher_parsers.sh installs them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from stand_ins import release

from topo_gate.launchers import plan_without_profile, sglang, vllm
from topo_gate.plugins import APPLIED_ENV, FALLBACK_ENV, PROFILE_ENV, Outcome, export_env, say
from topo_gate.profile.reader import FINGERPRINT_ENV

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "h200-x2" / "h7168-run1.yaml"
PLUGIN_ENV = (PROFILE_ENV, APPLIED_ENV, FINGERPRINT_ENV, FALLBACK_ENV)
FORCED = {"sglang": sglang.FORCE_NCCL, "vllm": vllm.FORCE_NCCL}


def run_plugin(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (a launcher process) with only ``env`` of the plugin variables."""
    base = {k: v for k, v in os.environ.items() if k not in PLUGIN_ENV}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        # A guard against a hung interpreter, not a bound on speed: where the launcher is installed
        # (scripts/launcher_parsers.sh) importing it took over 120 s on a loaded 2-core machine.
        timeout=900,
        cwd=ROOT,
    )


@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_unset_profile_does_nothing(launcher: str) -> None:
    code = (
        f"import os, json; before = dict(os.environ)\n"
        f"from topo_gate.plugins import {launcher}\n{launcher}.register()\n"
        "print(json.dumps(dict(os.environ) == before))"
    )
    done = run_plugin(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "true" and done.stderr == ""


def test_importing_the_plugins_loads_nothing_heavy() -> None:
    code = (
        "import sys, json\nimport topo_gate.plugins.sglang, topo_gate.plugins.vllm\n"
        "print(json.dumps(sorted(m for m in ('torch', 'pynvml', 'click', 'rich', 'vllm', 'sglang') if m in sys.modules)))"
    )
    done = run_plugin(code)
    assert json.loads(done.stdout) == []


HOOK = "import os, json\nfrom topo_gate.plugins import {launcher}\n{launcher}.register()\nprint(json.dumps(dict(os.environ)))"


def _cannot_hook(launcher: str, **env: str) -> tuple[dict, str]:
    """The plugin registered where its launcher is not installed (this venv): the hook cannot be placed."""
    done = run_plugin(HOOK.format(launcher=launcher), **{PROFILE_ENV: str(PROFILE), **env})
    if f"No module named '{launcher}'" not in done.stderr:
        pytest.skip(f"{launcher} is installed here: tests/plugins/test_real_launchers.py covers it")
    assert done.returncode == 0
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"topo-gate: {launcher} plugin: {release(launcher)}: profile sha256:")
    return json.loads(done.stdout), line


@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_a_plugin_that_cannot_hook_changes_nothing_and_says_why(launcher: str) -> None:
    env, line = _cannot_hook(launcher)
    assert not any(name in env for name in FORCED[launcher].env)
    assert "nothing changed (plugin could not hook" in line
    assert "applied" not in line and "cannot apply" not in line


@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_under_fallback_nccl_a_plugin_that_cannot_hook_forces_nccl_through_env(launcher: str) -> None:
    # The plugin must not raise, must export the NCCL-forcing env, and must name the flags it could
    # not apply.
    env, line = _cannot_hook(launcher, **{FALLBACK_ENV: "nccl"})
    forced = FORCED[launcher]
    assert {name: env.get(name) for name in forced.env} == dict(forced.env)
    assert "NCCL forced (plugin could not hook" in line and f"cannot apply {' '.join(forced.args)}" in line
    assert "applied " + " ".join(f"{k}={v}" for k, v in forced.env.items()) + ";" in line  # the env only


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_a_misspelt_fallback_changes_nothing_and_the_line_says_why(launcher: str) -> None:
    env, line = _cannot_hook(launcher, **{FALLBACK_ENV: "NCCL!"})
    assert not any(name in env for name in FORCED[launcher].env)
    assert "nothing changed (" in line
    assert f"{FALLBACK_ENV}='NCCL!' is not one of launcher-default, nccl" in line


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_a_process_the_launcher_started_inherits_instead_of_planning_again(launcher: str) -> None:
    code = f"from topo_gate.plugins import {launcher}\n{launcher}.register()\n"
    # This test process stands for the launching process: it is the child's parent.
    record = f"{os.getpid()} profile sha256:ab: following the profile"
    done = run_plugin(code, **{PROFILE_ENV: str(PROFILE), APPLIED_ENV: record})
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"topo-gate: {launcher} plugin: inherited from the launching process {os.getpid()}: "
        "profile sha256:ab: following the profile"
    ]


@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_a_record_left_by_an_unrelated_launch_is_ignored(launcher: str) -> None:
    stale = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    record = f"{stale.stdout.strip()} profile sha256:ab: following the profile"
    done = run_plugin(
        f"from topo_gate.plugins import {launcher}\n{launcher}.register()\n",
        **{PROFILE_ENV: str(PROFILE), APPLIED_ENV: record},
    )
    assert done.returncode == 0
    assert "inherited" not in done.stderr


def test_every_flag_of_the_nccl_plans_has_a_field_to_apply_it_as() -> None:
    from topo_gate.launchers.command.merge import split_flags
    from topo_gate.plugins.fields import FLAG_FIELDS, VLLM_COMPILATION_FLAG

    for launcher in ("sglang", "vllm"):
        flags = [
            flag
            for flag, _ in split_flags(plan_without_profile(launcher, "x", fallback="nccl").args, launcher)
        ]
        assert flags and set(flags) <= {*FLAG_FIELDS[launcher], VLLM_COMPILATION_FLAG}


def test_the_users_env_wins_and_is_reported() -> None:
    environ = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "1", "VLLM_ALLREDUCE_USE_FLASHINFER": "0"}
    kept = export_env(
        {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0", "VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_X": "1"}, environ
    )
    assert kept == ("VLLM_ALLREDUCE_USE_SYMM_MEM=1",)
    assert environ == {
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "1",
        "VLLM_ALLREDUCE_USE_FLASHINFER": "0",
        "VLLM_X": "1",
    }


def test_the_log_line_names_plugin_digest_and_what_was_done() -> None:
    plan = plan_without_profile("sglang", "node not checked: no NVIDIA driver", fallback="nccl")
    kept = ("disable_custom_all_reduce=False", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1")
    line = Outcome("sglang", "sha256:ab", plan, ("--x not applied",), kept).line()
    # What the user kept is not reported as applied.
    assert line == (
        f"topo-gate: sglang plugin: {release('sglang')}: profile sha256:ab: NCCL forced (node not checked: no NVIDIA driver); "
        "applied --enforce-disable-flashinfer-allreduce-fusion; --x not applied; "
        "yours kept: disable_custom_all_reduce=False, SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1"
    )


def test_the_plugins_log_line_is_inert(capsys) -> None:
    """It names files (a profile set's member, a workload): a terminal escape in one is shown inert."""
    say(f"topo-gate: vllm plugin: {release('vllm')}: profile set /p: member \x1b]0;owned\x07\x1b[2J.yaml")
    err = capsys.readouterr().err
    assert (
        err
        == f"topo-gate: vllm plugin: {release('vllm')}: profile set /p: member \\x1b]0;owned\\x07\\x1b[2J.yaml\n"
    )
    say("line\nbreak\u202e")  # a newline and a bidi override: one line still
    assert capsys.readouterr().err == "line\\x0abreak\\u202e\n"
