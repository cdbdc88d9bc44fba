"""``ab`` takes the node as ``exec`` and ``recommend`` do: ``--node-fingerprint``, else (unless ``--from``
names a capture) ``TOPO_GATE_NODE_FINGERPRINT``, else the node is read (tests/launchers/test_node_fingerprint_rule.py)."""

from __future__ import annotations

import json

from ab_helpers import BUNDLED_FINGERPRINT, BUNDLED_PROFILE, CAPTURE, DATA

from topo_gate.cli import main

STEADY = [100.0, 100.0, 101.0, 102.0, 99.0, 100.0]
OTHER = "sha256:" + "cd" * 32


def _cmd(bench) -> list[str]:
    bench.scenario(arms=[], template=str(DATA / "sglang-one-batch.jsonl"), set=["median_decode_throughput"],
                   result_flag="--result-filename", values={"default": STEADY})  # fmt: skip
    return [*bench.module("sglang.benchmark.one_batch"), "--model-path", "M", "--tp-size", "2"]


def _node(capsys, *argv: str) -> dict:
    code = main(["ab", "--profile", str(BUNDLED_PROFILE), "--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)["node"]


def test_the_node_in_the_environment(bench, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", BUNDLED_FINGERPRINT)
    node = _node(capsys, "--", *_cmd(bench))  # no NVML here: without the variable, no plan (exit 4)
    assert node == {"fingerprint": BUNDLED_FINGERPRINT, "checked_by": "TOPO_GATE_NODE_FINGERPRINT"}


def test_a_capture_named_is_read_over_the_environment(bench, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", OTHER)
    node = _node(capsys, "--from", str(CAPTURE), "--", *_cmd(bench))
    assert node == {"fingerprint": BUNDLED_FINGERPRINT, "checked_by": "capture"}


def test_the_option_wins_over_the_environment(bench, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", OTHER)
    node = _node(capsys, "--node-fingerprint", BUNDLED_FINGERPRINT, "--", *_cmd(bench))
    assert node == {"fingerprint": BUNDLED_FINGERPRINT, "checked_by": "--node-fingerprint"}
