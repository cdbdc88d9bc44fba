"""``ab --out`` goes through the one clobbering guard: never one of the session's inputs (the profile,
a profile set's member, the benchmark script, the ``--from`` capture, a file CMD names), a hard link
or symlink of one included; a folder is refused like every ``--out`` (exit 8), before anything runs."""

from __future__ import annotations

import os
import shutil

import pytest
from ab_helpers import CAPTURE, DATA

from topo_gate.cli import main


def _ab(capsys, *argv: str) -> tuple[int, str]:
    code = main(["ab", *argv])
    return code, capsys.readouterr().err


def _scenario(bench) -> None:
    bench.scenario(
        values={"default": [100.0] * 6}, template=str(DATA / "vllm-serve.json"), set=["output_throughput"]
    )


def _refused(code: int, err: str, out: str, other: str) -> None:
    assert code == 8, err
    assert err.startswith("topo-gate: error: ") and len(err.strip().splitlines()) == 1
    assert f"{out} (--out) is the input {other}" in err


def test_the_profile_as_out_is_refused_and_left_as_it_was(bench, capsys, sglang_node, tmp_path) -> None:
    profile = tmp_path / "node.yaml"
    shutil.copy(sglang_node.profile, profile)
    before = profile.read_bytes()
    wrapper = bench.program("serve_and_bench.sh")
    _scenario(bench)
    argv = ["--profile", str(profile), "--node-fingerprint", "sha256:" + "ab" * 32, "--bench", "vllm-serve"]
    code, err = _ab(capsys, *argv, "--out", str(profile), "--", wrapper, "-tp", "2")
    _refused(code, err, str(profile), f"{profile} (--profile)")
    assert profile.read_bytes() == before and bench.seen() == []


def test_a_hard_link_of_the_profile_is_the_profile(bench, capsys, sglang_node, tmp_path) -> None:
    profile = tmp_path / "node.yaml"
    shutil.copy(sglang_node.profile, profile)
    link = tmp_path / "ab.json"
    os.link(profile, link)
    wrapper = bench.program("serve_and_bench.sh")
    _scenario(bench)
    code, err = _ab(
        capsys,
        "--profile",
        str(profile),
        "--bench",
        "vllm-serve",
        "--out",
        str(link),
        "--",
        wrapper,
        "-tp",
        "2",
    )
    _refused(code, err, str(link), f"{profile} (--profile)")
    assert link.read_bytes() == profile.read_bytes() and bench.seen() == []


def test_a_member_of_the_profile_set_is_an_input(bench, capsys, sglang_node, tmp_path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    member = folder / "node.yaml"
    shutil.copy(sglang_node.profile, member)
    wrapper = bench.program("serve_and_bench.sh")
    _scenario(bench)
    code, err = _ab(
        capsys,
        "--profile",
        str(folder),
        "--bench",
        "vllm-serve",
        "--out",
        str(member),
        "--",
        wrapper,
        "-tp",
        "2",
    )
    _refused(code, err, str(member), f"{member} (--profile)")


@pytest.mark.parametrize("spelled", ["path", "on PATH"])
def test_the_benchmark_script_as_out_is_refused(bench, capsys, sglang_node, monkeypatch, spelled) -> None:
    wrapper = bench.program("serve_and_bench.sh")
    before = open(wrapper, "rb").read()
    if spelled == "on PATH":
        monkeypatch.setenv("PATH", f"{bench.bin}{os.pathsep}{os.environ['PATH']}")
    program = wrapper if spelled == "path" else "serve_and_bench.sh"
    _scenario(bench)
    code, err = _ab(
        capsys, *sglang_node.args(), "--bench", "vllm-serve", "--out", wrapper, "--", program, "-tp", "2"
    )
    assert code == 8 and "(--out) is the input" in err and "(CMD)" in err
    assert open(wrapper, "rb").read() == before and bench.seen() == []


def test_a_file_cmd_names_as_out_is_refused(bench, capsys, sglang_node, tmp_path) -> None:
    """``python bench.py --dataset=d.jsonl``: both files are the session's inputs."""
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("{}\n")
    wrapper = bench.program("serve_and_bench.sh")
    _scenario(bench)
    cmd = [wrapper, "-tp", "2", f"--dataset={dataset}"]
    code, err = _ab(capsys, *sglang_node.args(), "--bench", "vllm-serve", "--out", str(dataset), "--", *cmd)
    _refused(code, err, str(dataset), f"{dataset} (CMD)")
    assert dataset.read_text() == "{}\n"


def test_the_capture_as_out_is_refused(bench, capsys, sglang_node, tmp_path) -> None:
    capture = tmp_path / "node.capture.json"
    shutil.copy(CAPTURE, capture)
    before = capture.read_bytes()
    wrapper = bench.program("serve_and_bench.sh")
    _scenario(bench)
    argv = ["--profile", str(sglang_node.profile), "--from", str(capture), "--bench", "vllm-serve"]
    code, err = _ab(capsys, *argv, "--out", str(capture), "--", wrapper, "-tp", "2")
    _refused(code, err, str(capture), f"{capture} (--from)")
    assert capture.read_bytes() == before and bench.seen() == []


def test_a_folder_as_out_is_exit_8_not_a_usage_error(bench, capsys, sglang_node, tmp_path) -> None:
    wrapper = bench.program("serve_and_bench.sh")
    _scenario(bench)
    folder = tmp_path / "records"
    folder.mkdir()
    code, err = _ab(
        capsys, *sglang_node.args(), "--bench", "vllm-serve", "--out", str(folder), "--", wrapper, "-tp", "2"
    )
    assert code == 8 and f"{folder}: refusing to write: it is a folder" in err
    assert bench.seen() == []
