"""Evidence that describes an impossible run is refused where a profile would be built from it.

``decide`` (and ``probe --replay``) build the profile the evidence implies and hold it to the
loader's semantic checks (``profile/semantics.check_semantics``, the one function the loader, the
launcher reader and ``validate`` run too): a TP4 run on a node of 2 GPUs, a TP size both skipped and
run, a run of a group under a class the node does not give it. Each is a hostile data file
(tests/fixtures/hostile/evidence-*.json), refused with exit 3 and one line naming the field.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from topo_gate import probe
from topo_gate.cli import main
from topo_gate.probe.replay import check_semantics as replay_check
from topo_gate.profile import ProfileInvalid, io, reader, semantics

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"
CASES = {
    "evidence-tp4-on-two-gpus.json": "decisions[1].group: TP 4 on GPUs [0, 1, 2, 3], but the node has no GPU 2",
    "evidence-skipped-and-run.json": "skipped[0].tp: TP 2 is both skipped (node has 1 usable GPU) and decided",
    "evidence-class-not-the-node-s.json": "decisions[0].group_class: the node lists GPUs [0, 1] as 'nvswitch', not 'pcie-switch'",
}


@pytest.mark.parametrize(("name", "fragment"), CASES.items())
def test_decide_refuses_with_exit_3_naming_the_field(name: str, fragment: str, capsys, tmp_path) -> None:
    path = HOSTILE / name
    assert main(["decide", str(path)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert (
        err.startswith(f"topo-gate: error: {path}: the profile it implies is invalid: ") and fragment in err
    )
    assert main(["probe", "--replay", str(path), "--out", str(tmp_path / "p.yaml")]) == 3
    assert fragment in capsys.readouterr().err and not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize(("name", "fragment"), CASES.items())
def test_the_library_raises_the_loader_s_error(name: str, fragment: str) -> None:
    with pytest.raises(ProfileInvalid) as raised:
        probe.preview(HOSTILE / name)
    assert fragment in str(raised.value)


def test_every_path_runs_the_one_check() -> None:
    # decide (through probe.build_profile), the loader, and the reader's Profile objects: not copies.
    assert replay_check is io.check_semantics is reader.check_semantics is semantics.check_semantics
