"""A plugin takes a plan as already applied only where the record names one of its own ancestor
processes (``plugins.inherited``): a record left in the environment by another process -- an earlier
launch, a sibling, this very process -- is no parent's, and the launch plans for itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from topo_gate.plugins import APPLIED_ENV, inherited

APPLIED = "profile sha256:ab: following the profile"


def _record(pid: int) -> dict[str, str]:
    return {APPLIED_ENV: f"{pid} {APPLIED}"}


@pytest.mark.parametrize("generation", ["parent", "grandparent"])
def test_a_record_of_an_ancestor_is_inherited(generation: str, capsys) -> None:
    pid = os.getppid()
    if generation == "grandparent":
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            pid = int(handle.read().rpartition(")")[2].split()[1])
        if pid <= 1:
            pytest.skip("this process's parent is a direct child of init")
    assert inherited("vllm", _record(pid))
    assert (
        capsys.readouterr().err
        == f"topo-gate: vllm plugin: inherited from the launching process {pid}: {APPLIED}\n"
    )


def test_a_record_of_a_process_that_is_no_ancestor_is_not_inherited(capsys) -> None:
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # Alive, started by the same parent as what it launches: a child, not an ancestor.
        assert not inherited("sglang", _record(sibling.pid))
    finally:
        sibling.kill()
        sibling.wait()
    assert not inherited("sglang", _record(os.getpid()))  # the plan applied here is not a parent's
    for record in ("", "x profile", "-1 profile", f" {os.getppid()} profile"):
        assert not inherited("sglang", {APPLIED_ENV: record})
    assert capsys.readouterr().err == ""


def test_a_parent_whose_name_holds_a_parenthesis_and_numbers_is_read_right(tmp_path) -> None:
    # /proc/PID/stat writes the command name in parentheses as it is: a name such as "x) S 1 1" must
    # not be read as the end of the name, or the chain would stop at a made-up parent (PID 1).
    grandchild = textwrap.dedent(
        """
        import json
        from topo_gate.plugins import _ancestors
        print(json.dumps(sorted(_ancestors())))
        """
    )
    middle = textwrap.dedent(
        f"""
        import subprocess, sys
        with open("/proc/self/comm", "w") as handle:
            handle.write("x) S 1 1")
        sys.exit(subprocess.run([sys.executable, "-c", {grandchild!r}]).returncode)
        """
    )
    done = subprocess.run([sys.executable, "-c", middle], capture_output=True, text=True, check=True)
    assert os.getpid() in json.loads(done.stdout)


def _pid_namespace_runs() -> bool:
    """Whether this machine lets an unprivileged user start a PID namespace (``unshare -Urpf``)."""
    try:
        probe = subprocess.run(["unshare", "-Urpf", "--mount-proc", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@pytest.mark.skipif(not _pid_namespace_runs(), reason="no unprivileged PID namespace here")
def test_a_launcher_that_is_pid_1_is_its_workers_ancestor() -> None:
    # A container's entrypoint is PID 1: the launcher applies the plan there, and its workers, whose
    # parent is PID 1, inherit it rather than plan again.
    worker = textwrap.dedent(
        f"""
        from topo_gate.plugins import inherited
        print(inherited("vllm", {{{APPLIED_ENV!r}: "1 {APPLIED}"}}))
        """
    )
    launcher = f"import os, subprocess, sys\nassert os.getpid() == 1\nsubprocess.run([sys.executable, '-c', {worker!r}], check=True)"
    done = subprocess.run(
        ["unshare", "-Urpf", "--mount-proc", sys.executable, "-c", launcher],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout == "True\n", done.stderr
