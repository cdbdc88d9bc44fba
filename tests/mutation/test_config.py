"""scripts/mutation.sh's configuration stays true as the code moves (the run itself is too slow for the
suite: docs/mutation.md): every module and test file it names exists, every equivalent mutant it lists
still points at a line of its module, and the forcing sets get their knock-out mutants."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import mutation  # noqa: E402
from mutation_data import data_mutants  # noqa: E402


@pytest.mark.parametrize("target", mutation.MODULES, ids=lambda target: target.name)
def test_every_module_and_test_file_exists(target: mutation.Target) -> None:
    assert (REPO / target.module).is_file()
    for test in target.tests:
        path, _, name = test.partition("::")
        assert (REPO / path).is_file(), test
        # A test named by node id must still be there: pytest finds no test and fails every mutant.
        assert not name or f"def {name}(" in (REPO / path).read_text(encoding="utf-8"), test
    source = (REPO / target.module).read_text(encoding="utf-8")
    for name in (*target.functions, *([target.constant] if target.constant else [])):
        assert f"def {name}(" in source or f"{name} = " in source, name


def test_every_equivalent_mutant_names_a_line_of_its_module() -> None:
    equivalents = mutation.read_equivalents(mutation.EQUIVALENT_FILE)
    assert equivalents
    for module, operator, line in equivalents:
        assert operator.startswith("core/") and "@" in operator, operator
        lines = {text.strip() for text in (REPO / module).read_text(encoding="utf-8").splitlines()}
        assert line in lines, (module, line)


def test_the_vllm_forcing_set_loses_each_knob_in_turn() -> None:
    text = (REPO / "topo_gate" / "launchers" / "vllm.py").read_text(encoding="utf-8")
    removed = [m for m in data_mutants(text, "FORCE_NCCL") if m.operator == "data/remove"]
    statements = [
        next(line for line in m.source.splitlines() if line.startswith("FORCE_NCCL = ")) for m in removed
    ]
    assert sum("VLLM_ALLREDUCE_USE_SYMM_MEM" not in statement for statement in statements) == 1
    for mutant in data_mutants(text, "FORCE_NCCL"):
        compile(mutant.source, "vllm.py", "exec")  # every mutant is valid Python
