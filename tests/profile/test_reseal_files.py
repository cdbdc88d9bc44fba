"""``validate --reseal`` rewrites the profile a path names -- through a symbolic link, the file the link
names, the link kept -- with its own permissions; on a set it says what reseals a member; and
``report --out`` naming a file is an output not written, exit 8 (topo_gate/cli/validate.py, report.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.profile import load_profile

REPO = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def edited(example_path: Path, tmp_path: Path) -> Path:
    """The example profile with a comment and a new creation time: only its digest is stale."""
    path = tmp_path / "node-v3.yaml"
    text = example_path.read_text()
    created = next(line for line in text.splitlines() if line.startswith("created:"))
    path.write_text("# edited\n" + text.replace(created, "created: '2020-01-01T00:00:00Z'"))
    with pytest.raises(Exception, match="edited by hand"):
        load_profile(path)
    return path


def test_reseal_through_a_link_reseals_the_profile_it_names_and_keeps_the_link(
    edited: Path, tmp_path: Path, capsys
) -> None:
    link = tmp_path / "current.yaml"
    link.symlink_to(edited.name)
    code, out, err = _run(capsys, "validate", "--reseal", str(link))
    assert code == 0 and out.startswith("OK "), err
    assert link.is_symlink() and os.readlink(link) == edited.name
    assert load_profile(edited).created == "2020-01-01T00:00:00Z"  # sealed: it loads
    assert err == f"resealed {link} ({edited})\n"


def test_reseal_of_the_file_itself_names_it_once(edited: Path, capsys) -> None:
    assert _run(capsys, "validate", "--reseal", str(edited))[2] == f"resealed {edited}\n"


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644, 0o444])
def test_a_resealed_file_keeps_its_permissions(edited: Path, mode: int, capsys) -> None:
    edited.chmod(mode)
    assert _run(capsys, "validate", "--reseal", str(edited))[0] == 0
    assert stat.S_IMODE(edited.stat().st_mode) == mode


def test_a_resealed_file_drops_setuid_which_no_profile_needs(edited: Path, capsys) -> None:
    edited.chmod(0o4640)
    assert _run(capsys, "validate", "--reseal", str(edited))[0] == 0
    assert stat.S_IMODE(edited.stat().st_mode) == 0o640


def test_reseal_on_a_set_names_the_member_to_reseal_not_the_command_just_run(
    edited: Path, tmp_path: Path, capsys
) -> None:
    code, _, err = _run(capsys, "validate", "--reseal", str(tmp_path))
    assert code == 1
    assert f"--reseal reseals files, not a set's members: `topo-gate validate --reseal {edited}`" in err
    assert "re-seal a deliberate edit with `topo-gate validate --reseal`)" not in err
    # Without --reseal the member's own advice stands: that command reseals it.
    assert (
        "re-seal a deliberate edit with `topo-gate validate --reseal`"
        in _run(capsys, "validate", str(tmp_path))[2]
    )


def test_report_out_naming_a_file_is_an_output_not_written(tmp_path: Path, capsys) -> None:
    existing = tmp_path / "node.yaml"
    existing.write_text("kept\n")
    profile = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
    code, _, err = _run(capsys, "report", str(profile), "--out", str(existing), "--format", "md")
    assert code == 8
    assert err == (
        f"topo-gate: error: {existing}: refusing to write: it is not a folder (--out names the folder to write into)\n"
    )
    assert existing.read_text() == "kept\n"
    folder = tmp_path / "new-folder"  # the edge just inside: a folder that does not exist yet is made
    assert _run(capsys, "report", str(profile), "--out", str(folder), "--format", "md")[0] == 0
    assert (folder / "summary.md").is_file()
