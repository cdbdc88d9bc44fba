"""The guarded writer's edges, each as a user meets it: the mode a written file gets under the user's
umask, the one-line refusal when the write or the lock cannot be had, the lock that lets exactly one
writer hold ``--out`` even when lock files come and go under it, and the evidence name it picks.

The races of the lock (a lock file removed or replaced between our open and our flock) are made
deterministic by running the other process's steps at that moment from a wrapped ``fcntl.flock``;
the "other process" holds its lock through a file description of its own, which ``flock`` treats as
another owner even within this process.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

import topo_gate._atomic as atomic
from topo_gate._atomic import OutputRefused, exclusive_output, new_unique_path, write_atomic
from topo_gate.cli import main

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
CAPTURE = REPO / "tests" / "fixtures" / "captures" / "h200-x2.real.json"
UNWRITABLE = 8
CPU_PROBE = ["probe", "--device", "cpu", "--tp", "2", "--hidden", "64", "--max-tokens", "1"]


@pytest.fixture
def set_umask() -> Iterator[Callable[[int], None]]:
    """Set the process umask for one test; the one it had is put back afterwards."""
    before = os.umask(0o022)
    os.umask(before)
    try:
        yield os.umask
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    _, err = capsys.readouterr()
    assert err.count("\n") == 1, err
    return err


# --- the mode of what is written -------------------------------------------------------------------

UMASKS = [(0o000, 0o666), (0o022, 0o644), (0o027, 0o640), (0o077, 0o600)]


@pytest.mark.parametrize(("umask", "mode"), UMASKS, ids=[f"umask {u:03o}" for u, _ in UMASKS])
def test_a_profile_gets_the_mode_an_ordinary_open_would_give(
    umask: int, mode: int, set_umask: Callable[[int], None], tmp_path: Path, capsys
) -> None:
    """A profile is committed and read by a launcher running as another user: it must be 0666 minus
    the umask (as `open()` makes it), not the temp file's 0600, nor anything with execute or setuid."""
    out = tmp_path / "p.yaml"
    set_umask(umask)
    assert main(["decide", str(EVIDENCE), "--out", str(out), "--bootstrap", "100"]) == 0, capsys.readouterr()
    assert _mode(out) == mode


@pytest.mark.parametrize(("umask", "mode"), UMASKS, ids=[f"umask {u:03o}" for u, _ in UMASKS])
def test_a_replaced_file_and_a_reserved_evidence_name_get_the_umask_mode(
    umask: int, mode: int, set_umask: Callable[[int], None], tmp_path: Path
) -> None:
    """Replacing an existing file gives the new one the umask's mode, not the old file's; the empty
    evidence file reserved by name beside --out gets the same mode the evidence will have."""
    old = tmp_path / "old.json"
    old.write_text("old\n")
    old.chmod(0o700)
    set_umask(umask)
    write_atomic(old, "new\n")
    reserved = new_unique_path(tmp_path, "evidence-", ".json")
    assert (old.read_text(), _mode(old)) == ("new\n", mode)
    assert (reserved.read_bytes(), _mode(reserved)) == (b"", mode)


LOCK_UMASKS = [(0o000, 0o644), (0o022, 0o644), (0o077, 0o600)]


@pytest.mark.parametrize(("umask", "mode"), LOCK_UMASKS, ids=[f"umask {u:03o}" for u, _ in LOCK_UMASKS])
def test_the_lock_file_is_readable_never_writable_or_executable_by_others(
    umask: int, mode: int, set_umask: Callable[[int], None], tmp_path: Path
) -> None:
    """The lock file beside --out (seen by `ls -a` while a probe runs) is rw-r--r-- at most, whatever
    the umask lets through: no other user may write or execute it."""
    set_umask(umask)
    with exclusive_output(tmp_path / "node.yaml"):
        assert _mode(tmp_path / ".node.yaml.lock") == mode


# --- one-line refusals ------------------------------------------------------------------------------


def test_a_write_from_a_removed_working_folder_still_lands_beside_the_output(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The temp file is made in the output's folder, never the working folder: a user whose shell sits
    in a folder since removed (where nothing can be created) still gets the profile written."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    out = tmp_path / "p.yaml"
    assert main(["decide", str(EVIDENCE), "--out", str(out), "--bootstrap", "100"]) == 0, capsys.readouterr()
    assert out.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


def test_a_temp_file_removed_before_the_rename_is_one_line_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch
) -> None:
    """A cleaner that deletes ``.*.tmp`` files under the writer makes the rename fail: one line with
    the system's reason, the old file kept, and the cleanup of the already-gone temp file no crash."""
    out = tmp_path / "out.yaml"
    out.write_text("old profile\n")
    real_replace = os.replace

    def replace_after_a_cleaner(src: str, dst: object) -> None:
        os.unlink(src)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_a_cleaner)
    with pytest.raises(OutputRefused) as refused:
        write_atomic(out, "new profile\n")
    assert str(refused.value) == f"{out}: cannot write: No such file or directory"
    assert out.read_text() == "old profile\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml"]


def test_an_error_without_an_errno_is_named_by_its_own_text(tmp_path: Path, monkeypatch) -> None:
    """An OSError that carries no errno (raised by a library, not the kernel) is reported by its own
    words, not mislabelled as a known reason such as "permission denied", nor as "None"."""

    def fails(src: str, dst: object) -> None:
        raise OSError("the rename was refused by the storage layer")

    monkeypatch.setattr(os, "replace", fails)
    with pytest.raises(OutputRefused) as refused:
        write_atomic(tmp_path / "out.yaml", "x")
    assert (
        str(refused.value)
        == f"{tmp_path / 'out.yaml'}: cannot write: the rename was refused by the storage layer"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_name_too_long_for_the_file_system_is_the_system_reason_alone(tmp_path: Path, capsys) -> None:
    """A reason topo-gate has no words of its own for is the system's message, without the
    "[Errno N]" and the repeated path that Python's exception text would add."""
    out = tmp_path / ("p" * 300 + ".yaml")
    assert main(["decide", str(EVIDENCE), "--out", str(out), "--bootstrap", "100"]) == UNWRITABLE
    assert _one_line(capsys) == f"topo-gate: error: {out}: cannot write: File name too long\n"


def test_a_lock_path_that_cannot_be_opened_is_one_line(tmp_path: Path, capsys) -> None:
    """A folder where the lock file would be (left by hand, or by another tool) is exit 8 and one
    line, before any trial runs, not a traceback."""
    out = tmp_path / "node.yaml"
    (tmp_path / ".node.yaml.lock").mkdir()
    assert main([*CPU_PROBE, "--out", str(out)]) == UNWRITABLE
    assert _one_line(capsys) == f"topo-gate: error: {out}: cannot write: Is a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".node.yaml.lock"]  # no trial ran


# --- the clobbering guard with paths it cannot identify -------------------------------------------


def test_two_outputs_in_a_missing_folder_are_not_the_same_file(tmp_path: Path, capsys) -> None:
    """Outputs the guard cannot place (their folder does not exist) are not compared with each other:
    the user hears that the folder is missing, not that --out and --evidence are the same file."""
    missing = tmp_path / "missing"
    argv = [*CPU_PROBE, "--out", str(missing / "node.yaml"), "--evidence", str(missing / "node.json")]
    assert main(argv) == UNWRITABLE
    assert _one_line(capsys) == (
        f"topo-gate: error: {missing / 'node.json'}: cannot write: folder {missing} does not exist\n"
    )


def test_an_unplaceable_out_does_not_stop_the_check_of_the_evidence_path(tmp_path: Path, capsys) -> None:
    """--out in a missing folder is left to the writer, but --evidence onto the capture being planned
    from is still refused as such, naming both paths, and the capture keeps its bytes."""
    capture = tmp_path / "node.json"
    shutil.copy(CAPTURE, capture)
    before = hashlib.sha256(capture.read_bytes()).hexdigest()
    argv = ["probe", "--from", str(capture), "--hidden", "64", "--evidence", str(capture)]
    assert main([*argv, "--out", str(tmp_path / "missing" / "node.yaml")]) == UNWRITABLE
    assert _one_line(capsys) == (
        f"topo-gate: error: {capture} (--evidence) is the input {capture} (--from): writing it would "
        "destroy that input; choose another --evidence\n"
    )
    assert hashlib.sha256(capture.read_bytes()).hexdigest() == before


# --- the lock under races --------------------------------------------------------------------------


def _at_flock(monkeypatch, other_process: Callable[[], None]) -> None:
    """Run ``other_process`` once, between exclusive_output's open of the lock file and its flock."""
    real_flock = fcntl.flock
    pending = [other_process]

    def flock(fd: int, operation: int) -> None:
        if pending:
            pending.pop()()
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)


def _refused_at_once(out: Path) -> None:
    with pytest.raises(OutputRefused, match=r": another topo-gate process is writing it \(lock "):
        with exclusive_output(out):
            pass


@pytest.mark.parametrize("newer", ["lower inode", "higher inode"])
def test_a_lock_file_replaced_before_our_flock_is_not_taken_for_ours(
    newer: str, tmp_path: Path, monkeypatch
) -> None:
    """A stale lock file is opened; before our flock, another probe replaces it with a new lock file
    and locks that. Our flock on the old file succeeds, but the lock is the file now at the path: we
    must be refused, or two probes write the same --out. (Inode numbers carry no order, so both a
    lower and a higher one for the newer file.)"""
    out = tmp_path / "node.yaml"
    lock = tmp_path / ".node.yaml.lock"
    files = [tmp_path / "a", tmp_path / "b"]
    for file in files:
        file.write_text("")
    low, high = sorted(files, key=lambda file: os.stat(file).st_ino)
    stale, replacement = (high, low) if newer == "lower inode" else (low, high)
    stale.rename(lock)
    held: list[int] = []

    def another_probe_replaces_and_locks() -> None:
        fd = os.open(replacement, os.O_RDWR)
        held.append(fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the wrapper is not re-entered: pending is empty
        os.rename(replacement, lock)

    _at_flock(monkeypatch, another_probe_replaces_and_locks)
    try:
        _refused_at_once(out)
        assert lock.exists()  # the refused one leaves the other probe's lock file alone
    finally:
        for fd in held:
            os.close(fd)


def test_a_lock_file_removed_before_our_flock_is_made_again(tmp_path: Path, monkeypatch) -> None:
    """The previous probe finishes (removing its lock file) between our open and our flock: we lock a
    file no longer at the path, so we must make a new one there, or a third probe would get in."""
    out = tmp_path / "node.yaml"
    lock = tmp_path / ".node.yaml.lock"
    _at_flock(monkeypatch, lambda: os.unlink(lock))
    with exclusive_output(out):
        assert lock.is_file()
        _refused_at_once(out)  # the third probe
    assert list(tmp_path.iterdir()) == []


def test_a_lock_file_removed_by_hand_while_held_is_no_crash_on_release(tmp_path: Path) -> None:
    """A user who deletes the lock file while a probe runs does not make the probe fail at its end,
    and the next probe gets the lock."""
    out = tmp_path / "node.yaml"
    with exclusive_output(out):
        (tmp_path / ".node.yaml.lock").unlink()
    with exclusive_output(out):
        pass
    assert list(tmp_path.iterdir()) == []


# --- the evidence name -----------------------------------------------------------------------------

FROZEN = datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)


class _FrozenClock(datetime):
    """A clock that always reads FROZEN: every name of one test falls in the same microsecond."""

    @classmethod
    def now(cls, tz: object = None) -> datetime:
        return FROZEN


def _evidence_name(counter: int) -> str:
    return f"evidence-20240102T030405.000006Z-{os.getpid()}{f'-{counter}' if counter else ''}.json"


@pytest.mark.parametrize("taken", [0, 1, 2, 99], ids=lambda n: f"{n} taken")
def test_the_evidence_name_is_the_first_free_one_in_the_same_microsecond(
    taken: int, tmp_path: Path, monkeypatch
) -> None:
    """Within one microsecond (one clock reading) the names are tried in order: the plain one, then
    -1, -2, ... up to -99, and the first free one is reserved; files already there are left alone."""
    monkeypatch.setattr(atomic, "datetime", _FrozenClock)
    for counter in range(taken):
        (tmp_path / _evidence_name(counter)).write_text("kept")
    chosen = new_unique_path(tmp_path, "evidence-", ".json")
    assert chosen == tmp_path / _evidence_name(taken) and chosen.read_bytes() == b""
    assert all((tmp_path / _evidence_name(counter)).read_text() == "kept" for counter in range(taken))


def test_a_hundred_names_taken_is_refused_in_one_line(tmp_path: Path, monkeypatch) -> None:
    """All 100 names of one microsecond taken: a refusal naming the folder, and no file created."""
    monkeypatch.setattr(atomic, "datetime", _FrozenClock)
    for counter in range(100):
        (tmp_path / _evidence_name(counter)).write_text("kept")
    with pytest.raises(OutputRefused) as refused:
        new_unique_path(tmp_path, "evidence-", ".json")
    assert str(refused.value) == f"{tmp_path}: cannot find a free name for evidence-....json"
    assert len(list(tmp_path.iterdir())) == 100


def test_an_evidence_folder_that_cannot_hold_files_is_one_line(tmp_path: Path) -> None:
    """A folder that is not one (a regular file) is a refusal naming the path and why, not a crash."""
    folder = tmp_path / "plain-file"
    folder.write_text("")
    with pytest.raises(OutputRefused) as refused:
        new_unique_path(folder, "evidence-", ".json")
    message = str(refused.value)
    assert message.startswith(f"{folder}/evidence-") and message.endswith(
        ": cannot write: a component of the path is not a folder"
    )
