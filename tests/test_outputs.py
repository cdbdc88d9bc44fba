"""Every writer goes through one guard: a regular file or a new path, else one line and exit 8.

Real files, real FIFOs and device nodes, a folder the kernel refuses to write into, a file-size
limit that makes the write itself fail; each through the CLI as a user runs it.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from topo_gate._atomic import OutputRefused, exclusive_output, new_unique_path, write_atomic
from topo_gate.cli import main

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
UNWRITABLE = 8


def _writers(out: Path) -> dict[str, list[str]]:
    return {
        "probe --replay": ["probe", "--replay", str(EVIDENCE), "--out", str(out)],
        "decide --out": ["decide", str(EVIDENCE), "--out", str(out), "--bootstrap", "100"],
    }


def _one_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("writer", ["probe --replay", "decide --out"])
def test_a_fifo_is_not_replaced(writer: str, tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "out.yaml"
    os.mkfifo(fifo)
    assert main(_writers(fifo)[writer]) == UNWRITABLE
    assert _one_line(capsys) == (
        f"topo-gate: error: {fifo}: refusing to write: it is not a regular file (a device, FIFO or socket)\n"
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_node_is_not_replaced(tmp_path: Path, capsys) -> None:
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a second /dev/null, in tmp_path
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    assert main(_writers(node)["probe --replay"]) == UNWRITABLE
    assert "refusing to write: it is not a regular file" in _one_line(capsys)
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_a_link_to_a_device_is_not_followed_into_it(tmp_path: Path, capsys) -> None:
    fifo, link = tmp_path / "fifo", tmp_path / "out.yaml"
    os.mkfifo(fifo)
    link.symlink_to(fifo)
    assert main(_writers(link)["decide --out"]) == UNWRITABLE
    assert "refusing to write" in _one_line(capsys)
    assert stat.S_ISFIFO(os.stat(link).st_mode)


@pytest.mark.parametrize("writer", ["probe --replay", "decide --out"])
def test_a_missing_folder_is_one_line(writer: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "no" / "such" / "out.yaml"
    assert main(_writers(out)[writer]) == UNWRITABLE
    assert _one_line(capsys) == (
        f"topo-gate: error: {out}: cannot write: folder {out.parent} does not exist\n"
    )


@contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """A folder the kernel refuses to write into, even for root (immutable), else by its mode."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("root ignores folder modes, and this filesystem has no immutable attribute")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)


@pytest.mark.parametrize("writer", ["probe --replay", "decide --out"])
def test_a_read_only_folder_is_one_line(writer: str, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    out = folder / "out.yaml"
    with _read_only(folder):
        assert main(_writers(out)[writer]) == UNWRITABLE
    err = _one_line(capsys)
    assert err.startswith(f"topo-gate: error: {out}: cannot write: ")
    assert err.endswith(("permission denied\n", "read-only file system\n"))
    assert list(folder.iterdir()) == []


def test_a_write_that_fails_midway_is_one_line_and_leaves_the_old_file(tmp_path: Path) -> None:
    """The file-size limit makes write() itself fail, as a full disk does (EFBIG instead of ENOSPC)."""
    out = tmp_path / "out.yaml"
    out.write_text("old profile\n")

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get the error, not the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    child = subprocess.run(
        [sys.executable, "-m", "topo_gate", "probe", "--replay", str(EVIDENCE), "--out", str(out)],
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        cwd=REPO,
        timeout=300,
    )
    assert child.returncode == UNWRITABLE, child.stderr
    assert child.stderr.endswith(f"{out}: cannot write: file too large for this system's limits\n")
    assert child.stderr.count("\n") == 1 and child.stdout == ""
    assert out.read_text() == "old profile\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml"]  # no temp file left


def test_full_disk_is_named(tmp_path: Path, monkeypatch) -> None:
    # ENOSPC cannot be produced on demand without a filesystem of our own; the writer's mapping is
    # checked here by making the rename report it (the write path itself is the test above).
    def full(src: str, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OutputRefused, match=r"out.yaml: cannot write: no space left on the device$"):
        write_atomic(tmp_path / "out.yaml", "x")
    assert list(tmp_path.iterdir()) == []


def test_a_second_probe_onto_the_same_out_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "node.yaml"
    argv = ["probe", "--device", "cpu", "--tp", "2", "--hidden", "64", "--max-tokens", "1", "--out", str(out)]
    with exclusive_output(out):  # another probe, holding --out while its trials run
        assert main(argv) == UNWRITABLE
    err = _one_line(capsys)
    assert err.startswith(f"topo-gate: error: {out}: another topo-gate process is writing it")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # the lock file goes with the lock


def test_evidence_names_never_collide_within_a_second(tmp_path: Path) -> None:
    names = [new_unique_path(tmp_path, "evidence-", ".json") for _ in range(50)]
    assert len(set(names)) == 50 and all(name.is_file() for name in names)
    assert all(name.name.startswith("evidence-") and f"-{os.getpid()}" in name.name for name in names)


def test_an_evidence_path_that_cannot_be_written_is_refused_before_any_trial(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "evidence.json"
    os.mkfifo(fifo)
    argv = ["probe", "--device", "cpu", "--tp", "2", "--hidden", "64", "--max-tokens", "1"]
    assert main([*argv, "--out", str(tmp_path / "p.yaml"), "--evidence", str(fifo)]) == UNWRITABLE
    assert "refusing to write: it is not a regular file" in _one_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence.json"]  # no trial ran, nothing written
