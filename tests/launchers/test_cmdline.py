"""Reading a launcher's command line as its parser does: the table, TensorRT-LLM's click options, the
user's knobs, and files the line names read through the guarded reader."""

from __future__ import annotations

import os
import threading

import pytest

from topo_gate.launchers import knobs
from topo_gate.launchers.command import parse as cmdline
from topo_gate.launchers.command.options import table


@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_the_tp_option_is_the_tables_canonical_name(launcher: str) -> None:
    action = table(launcher).by_option[cmdline.TP_OPTION[launcher]]
    assert action.canonical == cmdline.TP_OPTION[launcher]


@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_every_flag_topo_gate_emits_is_in_the_parsers_table(launcher: str) -> None:
    # A manifest flag the table lacks would read as unrecognized: the tables come from one parser.
    missing = set(knobs.manifest(launcher)["flags"]) - set(table(launcher).by_option)
    assert not missing


@pytest.mark.parametrize("size", ["0", "-4", "four", "²", "4.0", ""])
def test_a_tp_size_the_launcher_would_not_run_is_refused_in_one_line(size: str) -> None:
    with pytest.raises(cmdline.CmdlineError) as refused:
        cmdline.tp_size("vllm", ["vllm", "serve", "M", "-tp", size])
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("text", "size"), [("+4", 4), (" 4 ", 4), ("٤", 4), ("\u0e54", 4), ("1_6", 16)])
def test_tp_sizes_read_as_the_launchers_int_reads_them(text: str, size: int) -> None:
    assert cmdline.tp_size("sglang", ["python", "-m", "sglang.launch_server", "--tp-size", text]) == size


def test_only_the_later_polarity_of_a_switch_is_kept() -> None:
    read = cmdline.parse(
        "vllm", ["vllm", "serve", "M", "--enable-custom-all-reduce", "--disable-custom-all-reduce"]
    )
    assert read.options == {"--disable-custom-all-reduce": (None,)}


def test_a_line_without_an_entry_point_is_the_launchers_arguments() -> None:
    assert cmdline.tp_size("vllm", ["--tensor-parallel", "2"]) == 2
    # Another launcher's entry: read as this launcher's arguments, where -tp means nothing to SGLang.
    assert cmdline.tp_size("sglang", ["vllm", "serve", "M", "-tp", "4"]) is None


def test_user_knobs_takes_env_names_from_the_manifest() -> None:
    environ = {name: "0" for name in knobs.manifest("vllm")["env"]} | {"PATH": "/bin", "HOME": "/root"}
    got = cmdline.user_knobs("vllm", ["vllm", "serve", "M"], environ)
    assert dict(got.env) == {name: "0" for name in knobs.manifest("vllm")["env"]}
    assert got.args == () and got.config == {}


# ------------------------------------------------------------------------------------- TensorRT-LLM


def test_trtllm_exact_names_and_both_tp_spellings() -> None:
    assert cmdline.tp_size("trtllm", ["trtllm-serve", "M", "--tp_size", "4"]) == 4
    assert cmdline.tp_size("trtllm", ["trtllm-serve", "serve", "M", "--tensor_parallel_size=8"]) == 8
    # click takes no abbreviations and no - for _: these are not the TP option.
    assert cmdline.tp_size("trtllm", ["trtllm-serve", "M", "--tp", "4", "--tp-size", "2"]) is None
    # A value is the next token whatever it looks like (click); a switch takes none.
    assert cmdline.tp_size("trtllm", ["trtllm-serve", "M", "--host", "--tp_size", "4"]) is None
    assert cmdline.tp_size("trtllm", ["trtllm-serve", "M", "--trust_remote_code", "--tp_size", "2"]) == 2


def test_trtllm_options_file_overrides_the_tp_flag_and_gives_the_strategy(tmp_path) -> None:
    options = tmp_path / "extra.yaml"
    options.write_text("tensor_parallel_size: 8\nallreduce_strategy: NCCL\nmax_batch_size: 4\n")
    argv = ["trtllm-serve", "M", "--tp_size", "2", "--config", str(options)]
    assert cmdline.tp_size("trtllm", argv) == 8  # llm_args | the file's dict: the file wins
    assert cmdline.user_knobs("trtllm", argv, {}).config == {"allreduce_strategy": "NCCL"}
    assert cmdline.trtllm_options_at(cmdline.read("trtllm", argv)) == (5, False, str(options))
    attached = ["trtllm-serve", "M", f"--extra_llm_api_options={options}"]
    assert cmdline.trtllm_options_at(cmdline.read("trtllm", attached)) == (2, True, str(options))


def test_an_options_file_that_is_a_fifo_is_refused_without_waiting(tmp_path) -> None:
    fifo = tmp_path / "options.yaml"
    os.mkfifo(fifo)
    done = threading.Event()
    result: list[BaseException] = []

    def read() -> None:
        try:
            cmdline.user_knobs("trtllm", ["trtllm-serve", "M", "--extra_llm_api_options", str(fifo)], {})
        except BaseException as error:  # noqa: BLE001 -- handed to the test thread
            result.append(error)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(30), "reading a FIFO options file blocked"
    assert isinstance(result[0], cmdline.CmdlineFileError) and "not a regular file" in str(result[0])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "not a regular file"),  # /dev/zero: never read
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("<<: {tensor_parallel_size: 2}\ntensor_parallel_size: 4\n", "merge keys"),
        ("- allreduce_strategy\n", "not a YAML mapping"),
        ("allreduce_strategy: [\n", "not valid YAML"),
        ("", "not a YAML mapping"),
    ],
)
def test_a_hostile_options_file_is_one_line(tmp_path, content: str | None, problem: str) -> None:
    path = "/dev/zero" if content is None else str(tmp_path / "options.yaml")
    if content is not None:
        (tmp_path / "options.yaml").write_text(content)
    with pytest.raises(cmdline.CmdlineFileError) as refused:
        cmdline.user_knobs("trtllm", ["trtllm-serve", "M", "--extra_llm_api_options", path], {})
    assert problem in str(refused.value) and str(refused.value).startswith(path)
    assert "\n" not in str(refused.value)


def test_an_options_file_over_the_cap_is_refused(tmp_path) -> None:
    big = tmp_path / "options.yaml"
    big.write_text("x: " + "y" * (2 << 20))
    with pytest.raises(cmdline.CmdlineFileError, match="larger than"):
        cmdline.user_knobs("trtllm", ["trtllm-serve", "M", "--extra_llm_api_options", str(big)], {})
