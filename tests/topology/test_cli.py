"""`topo-gate topo` and `topo-gate capture` through the real entry point: output, JSON, exit codes."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from capture_paths import CAPTURES

from topo_gate.cli import main

NO_NVML = pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML"
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_topo_from_capture_renders_the_node(capsys, capture_path: Path) -> None:
    code, out, err = run(capsys, "topo", "--from", str(capture_path))
    assert code == 0, err
    assert "interconnect" in out and "Tensor-parallel groups" in out


def test_topo_json_carries_everything(capsys) -> None:
    path = CAPTURES / "rtx-pro-6000-pcie-x8.synthetic.json"
    code, out, _ = run(capsys, "topo", "--from", str(path), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["interconnect"]["class"] == "cross-socket"
    assert data["tp"]["4"]["measure"] == [
        {"gpus": [0, 1, 2, 3], "class": "node", "reason": data["tp"]["4"]["measure"][0]["reason"]}
    ]
    assert data["tp"]["8"]["groups"][0]["class"] == "no-p2p"
    assert data["fingerprint"].startswith("sha256:")
    assert data["source"]["synthetic"] is True
    assert len(data["pairs"]) == 56 and data["pairs"][0]["p2p"]["read"] == "ok"
    assert data["capture"]["format"] == "topo-gate/capture/v1"
    assert data["unknown"] == ["fabric: not_supported (GPU 0, 1, 2, 3, 4, 5, 6, 7)"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"{", "not JSON"),
        (b'{"format": "topo-gate/capture/v9"}', "not a topo-gate capture"),
    ],
)
def test_bad_capture_is_one_line_exit_3(capsys, tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "c.json"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, "topo", "--from", str(path))
    assert code == 3 and out == ""
    assert err.startswith("topo-gate: error: ") and message in err and err.count("\n") == 1


def test_capture_missing_a_gpu_pair_is_exit_3(capsys, tmp_path: Path) -> None:
    data = json.loads((CAPTURES / "l40s-no-p2p-x4.synthetic.json").read_text())
    data["pairs"] = [p for p in data["pairs"] if {p["a"], p["b"]} != {1, 2}]
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(data))
    code, _, err = run(capsys, "topo", "--from", str(path))
    assert code == 3 and "capture has no answers for GPU pair (1, 2)" in err


@NO_NVML
def test_no_driver_is_one_line_exit_4(capsys, tmp_path: Path) -> None:
    for args in (["topo"], ["capture", str(tmp_path / "c.json")]):
        code, _, err = run(capsys, *args)
        assert code == 4 and "no NVIDIA driver/NVML found" in err and err.count("\n") == 1
    assert not (tmp_path / "c.json").exists()


def test_help_has_examples_and_exit_codes() -> None:
    for name in ("topo", "capture"):
        out = subprocess.run(
            [sys.executable, "-m", "topo_gate", name, "--help"], capture_output=True, text=True, check=True
        ).stdout
        assert "Examples:" in out and "Exit codes:" in out


def test_the_links_title_and_legend_are_whole_lines_beside_a_narrow_table(capsys, monkeypatch) -> None:
    # One GPU makes the link matrix two columns wide; its title and legend must not fold into it.
    from topo_gate.cli import main

    monkeypatch.setenv("COLUMNS", "100")
    capture = Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "h100-x1.real.json"
    assert main(["topo", "--from", str(capture)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "Links (like nvidia-smi topo -m) and P2P" in lines
    assert "Tensor-parallel groups (contiguous, as launchers place ranks)" in lines
    assert any(
        line.startswith("NV# = NVLinks (direct or to NVSwitch); P2P ok for: R read, W write")
        for line in lines
    )
    assert max(len(line) for line in lines) <= 100
