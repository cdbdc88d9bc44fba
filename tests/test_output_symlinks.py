"""An output path that is a symbolic link: the link is replaced, never the file it points to.

The writer's contract (docs/ARCHITECTURE.md, ``_atomic.write_atomic``): the output is written to a
temporary file beside the path and renamed onto the path, so the path ends up a regular file holding
the new content, and whatever the link pointed at -- another profile, a committed file, a file
outside the output folder -- keeps its bytes and its modification time. A dangling link does not
create its target either.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from topo_gate._atomic import write_atomic
from topo_gate.cli import main
from topo_gate.profile import load_profile

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
OLD = b"another profile, which no output may overwrite\n"
LONG_AGO_NS = 1_700_000_000_123_456_789


def _pointed_at(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "kept.yaml"
    target.write_bytes(OLD)
    os.utime(target, ns=(LONG_AGO_NS, LONG_AGO_NS))
    return target


def _untouched(target: Path, before: os.stat_result) -> None:
    after = os.lstat(target)
    assert target.read_bytes() == OLD
    assert after.st_mtime_ns == LONG_AGO_NS == before.st_mtime_ns
    assert (after.st_ino, after.st_size, after.st_nlink) == (before.st_ino, before.st_size, before.st_nlink)


@pytest.mark.parametrize("where", ["same folder, relative", "other folder, absolute"])
@pytest.mark.parametrize(
    "writer",
    [
        ["probe", "--replay", str(EVIDENCE), "--out"],
        ["decide", str(EVIDENCE), "--bootstrap", "100", "--out"],
    ],
    ids=["probe --replay", "decide --out"],
)
def test_a_link_at_the_output_path_is_replaced_and_its_target_kept(
    tmp_path: Path, where: str, writer: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "profile.yaml"
    out.parent.mkdir()
    if where.startswith("same"):
        target = _pointed_at(out.parent)
        out.symlink_to(target.name)
    else:
        target = _pointed_at(tmp_path / "elsewhere")
        out.symlink_to(target)
    before = os.lstat(target)
    assert main([*writer, str(out)]) == 0, capsys.readouterr().err
    _untouched(target, before)
    assert stat.S_ISREG(os.lstat(out).st_mode)  # the link itself was replaced
    assert load_profile(out).decisions  # by the profile, complete and sealed
    beside = {"profile.yaml", target.name} if target.parent == out.parent else {"profile.yaml"}
    assert {p.name for p in out.parent.iterdir()} == beside  # no temporary file left


def test_write_atomic_replaces_the_link_not_its_target(tmp_path: Path) -> None:
    target = _pointed_at(tmp_path / "elsewhere")
    before = os.lstat(target)
    link = tmp_path / "out.json"
    link.symlink_to(target)
    assert write_atomic(link, "new\n") == link
    _untouched(target, before)
    assert stat.S_ISREG(os.lstat(link).st_mode) and link.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out.json"]


def test_a_dangling_link_does_not_create_its_target(tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere" / "never-created.yaml"
    missing.parent.mkdir()
    link = tmp_path / "out.yaml"
    link.symlink_to(missing)
    assert main(["probe", "--replay", str(EVIDENCE), "--out", str(link)]) == 0
    assert not missing.exists() and list(missing.parent.iterdir()) == []
    assert stat.S_ISREG(os.lstat(link).st_mode) and load_profile(link).decisions
