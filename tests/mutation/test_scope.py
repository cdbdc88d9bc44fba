"""What CI's mutation step selects (scripts/mutation_scope.py), on a throwaway git repository: the
changed lines of a change, the modules it touches, the fallback when the base commit is missing, a
reproducible order, and the time cap's shares (on a fake clock)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import mutation  # noqa: E402
import mutation_scope  # noqa: E402
from mutation_scope import Budget, changed_lines, out_of_scope, seeded_order, select  # noqa: E402

ORIGINAL = "".join(f"line {n}\n" for n in range(1, 11))


@dataclass(frozen=True)
class FakeTarget:
    module: str
    tests: tuple[str, ...]


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    return subprocess.run([*command, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "topo_gate").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "topo_gate" / "a.py").write_text(ORIGINAL)
    (tmp_path / "topo_gate" / "b.py").write_text(ORIGINAL)
    (tmp_path / "tests" / "test_b.py").write_text("def test(): pass\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "base")
    return tmp_path, _git(tmp_path, "rev-parse", "HEAD").strip()


def test_changed_lines_are_numbered_in_todays_file(repo: tuple[Path, str]) -> None:
    root, base = repo
    lines = ORIGINAL.splitlines(keepends=True)
    lines[2] = "line 3 changed\n"  # a changed line
    lines[6:7] = ["line 7\n", "new a\n", "new b\n"]  # two lines added after line 7 (today's 8 and 9)
    del lines[10]  # original line 9 deleted (it was today's 11; the gap lies between today's 10 and 11)
    (root / "topo_gate" / "a.py").write_text("".join(lines))
    _git(root, "commit", "-qam", "change")  # committed...
    (root / "topo_gate" / "new.py").write_text(
        "x = 1\ny = 2\n"
    )  # ...and untracked, as by hand before a commit
    changed = changed_lines(base, root)
    assert changed["topo_gate/a.py"] == {3, 8, 9, 10, 11}
    assert changed["topo_gate/new.py"] >= {1, 2}
    assert "topo_gate/b.py" not in changed


def test_a_moved_module_is_judged_on_the_lines_the_move_changed_and_a_pure_move_on_none(
    repo: tuple[Path, str],
) -> None:
    root, base = repo
    (root / "topo_gate" / "moved").mkdir()
    _git(root, "mv", "topo_gate/a.py", "topo_gate/moved/a.py")  # a.py: one import line edited
    (root / "topo_gate" / "moved" / "a.py").write_text(ORIGINAL.replace("line 2\n", "line 2 edited\n"))
    _git(root, "mv", "topo_gate/b.py", "topo_gate/moved/b.py")  # b.py: moved as it was
    _git(root, "commit", "-qam", "move")
    changed = changed_lines(base, root)
    assert changed == {"topo_gate/moved/a.py": {2}}
    targets = [
        FakeTarget("topo_gate/moved/a.py", ("tests/test_a.py",)),
        FakeTarget("topo_gate/moved/b.py", ("tests/test_b.py",)),
    ]
    chosen, _ = select(targets, base, root)
    assert [(t.module, s.lines) for t, s in chosen] == [("topo_gate/moved/a.py", {2})]


def test_a_changed_module_is_judged_on_its_lines_and_one_whose_tests_changed_whole(
    repo: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, base = repo
    (root / "topo_gate" / "a.py").write_text(ORIGINAL.replace("line 5\n", "line five\n"))
    (root / "tests" / "test_b.py").write_text("def test(): assert True\n")
    (root / "topo_gate" / "outside.py").write_text("z = 0\n")
    targets = [
        FakeTarget("topo_gate/a.py", ("tests/test_a.py",)),
        FakeTarget("topo_gate/b.py", ("tests/test_b.py::test",)),
    ]
    chosen, notes = select(targets, base, root)
    assert [(t.module, s.lines) for t, s in chosen] == [("topo_gate/a.py", {5}), ("topo_gate/b.py", None)]
    assert "its tests changed" in chosen[1][1].why
    assert notes[0].startswith(f"mutation scope: changes since {base[:12]}")


def test_nothing_changed_in_the_core_selects_nothing_and_says_so(repo: tuple[Path, str]) -> None:
    root, base = repo
    chosen, notes = select([FakeTarget("topo_gate/a.py", ("tests/test_a.py",))], base, root)
    assert chosen == [] and "nothing to mutate" in notes[-1]


@pytest.mark.parametrize("base", [None, "0" * 40, "not-a-revision"])
def test_a_missing_base_commit_falls_back_loudly(repo: tuple[Path, str], base: str | None) -> None:
    root, _ = repo
    targets = [FakeTarget(module, ()) for module in (*mutation_scope.FALLBACK_MODULES, "topo_gate/a.py")]
    chosen, notes = select(targets, base, root)
    assert [t.module for t, _ in chosen] == list(mutation_scope.FALLBACK_MODULES)
    assert all(selection.lines is None for _, selection in chosen)
    assert any(line.startswith("WARNING:") and "fallback set" in line for line in notes)
    assert any("NOT mutation-tested" in line for line in notes)


def test_a_module_with_its_own_base_is_judged_on_what_changed_since_that_base(repo: tuple[Path, str]) -> None:
    # b.py's whole run is recorded on "whole run": its change before that is judged, a.py's is not
    # hidden by b.py's later base.
    root, base = repo
    (root / "topo_gate" / "a.py").write_text(ORIGINAL.replace("line 4\n", "line four\n"))
    (root / "topo_gate" / "b.py").write_text(ORIGINAL.replace("line 6\n", "line six\n"))
    _git(root, "commit", "-qam", "whole run")
    whole_run = _git(root, "rev-parse", "HEAD").strip()
    (root / "topo_gate" / "b.py").write_text(
        ORIGINAL.replace("line 6\n", "line six\n").replace("line 8\n", "8\n")
    )
    targets = [FakeTarget("topo_gate/a.py", ()), FakeTarget("topo_gate/b.py", ("tests/test_b.py",))]
    chosen, notes = select(targets, base, root, module_bases={"topo_gate/b.py": whole_run})
    assert [(t.module, s.lines, s.why) for t, s in chosen] == [
        ("topo_gate/a.py", {4}, f"changed since {base[:12]}"),
        ("topo_gate/b.py", {8}, f"changed since {whole_run[:12]}"),
    ]
    assert any("since their own base" in note and "topo_gate/b.py" in note for note in notes)
    (root / "topo_gate" / "b.py").write_text(ORIGINAL.replace("line 6\n", "line six\n"))
    chosen, _ = select(targets, base, root, module_bases={"topo_gate/b.py": whole_run})
    assert [t.module for t, _ in chosen] == ["topo_gate/a.py"]


def test_a_module_base_missing_from_the_history_falls_back_loudly(repo: tuple[Path, str]) -> None:
    root, base = repo
    targets = [FakeTarget(module, ()) for module in (*mutation_scope.FALLBACK_MODULES, "topo_gate/a.py")]
    chosen, notes = select(targets, base, root, module_bases={"topo_gate/a.py": "1" * 40})
    assert [t.module for t, _ in chosen] == list(mutation_scope.FALLBACK_MODULES)
    assert any("1" * 40 in line and "not in this clone's history" in line for line in notes)


def test_the_base_file_gives_the_default_and_each_modules_own_base(tmp_path: Path) -> None:
    path = tmp_path / "base-commit"
    path.write_text(
        "# the default first, then modules with a whole run of their own\n"
        f"{'a' * 40}\n"
        f"{'b' * 40} topo_gate/x.py topo_gate/y.py  # both run whole there\n"
        f"{'c' * 40} topo_gate/z.py\n"
    )
    assert mutation_scope.read_base_commit(path) == "a" * 40
    assert mutation_scope.read_module_bases(path) == {
        "topo_gate/x.py": "b" * 40,
        "topo_gate/y.py": "b" * 40,
        "topo_gate/z.py": "c" * 40,
    }
    path.write_text(f"{'a' * 40}\n{'b' * 40} topo_gate/x.py\n{'c' * 40} topo_gate/x.py\n")
    with pytest.raises(ValueError, match="topo_gate/x.py has two base commits"):
        mutation_scope.read_module_bases(path)


def test_the_base_commit_file_names_commits_of_this_history_and_modules_of_the_core() -> None:
    base = mutation_scope.read_base_commit()
    own = mutation_scope.read_module_bases()
    modules = {target.module for target in mutation.MODULES}
    assert set(own) <= modules, f"own bases for modules outside MODULES: {sorted(set(own) - modules)}"
    for commit in (base, *own.values()):
        assert commit is not None and len(commit) == 40
        if (REPO / ".git").exists():
            assert subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO).returncode == 0


def test_a_mutant_is_in_scope_when_its_span_touches_a_changed_line() -> None:
    lines = frozenset({10})
    assert out_of_scope((9, 4), (10, 2), "f", (), [], lines) is None  # spans lines 9-10
    assert out_of_scope((11, 0), (11, 5), "f", (), [], lines) == "not on a changed line"
    assert out_of_scope((10, 0), (10, 5), "f", (), [], None) is None  # a whole module
    assert out_of_scope((10, 0), (10, 5), "g", ("f",), [], lines) == "out of scope"
    assert (
        out_of_scope((10, 4), (10, 8), "f", (), [((10, 2), (10, 9))], lines) == "annotation (never evaluated)"
    )


def test_the_order_is_fixed_by_seed_and_module_and_not_by_the_input_order() -> None:
    jobs = [((line, 0), "op", f"job-{line}") for line in range(50)]
    order = seeded_order(jobs, 0, "pkg_a")
    assert sorted(order) == sorted(job for *_, job in jobs)
    assert seeded_order(list(reversed(jobs)), 0, "pkg_a") == order
    assert seeded_order(jobs, 1, "pkg_a") != order and seeded_order(jobs, 0, "pkg_b") != order


def test_the_cap_is_shared_by_the_modules_not_yet_done(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(mutation_scope.time, "monotonic", lambda: now[0])
    budget = Budget(600.0, jobs=2, targets=4)
    assert budget.share() == 600.0 * 2 / 4  # two lanes for four modules
    now[0] += 300.0
    budget.finished()
    budget.finished()
    assert budget.remaining() == 300.0 and budget.share() == 300.0  # two left, one lane each
    budget.finished()
    assert budget.share() == 300.0  # the last one has one lane, not two
    now[0] += 301.0
    assert budget.remaining() == 0.0 and budget.share() == 0.0
    assert Budget(None, jobs=2, targets=1).share() is None
