"""Folding a plan into the user's command: the user's own flags, env and config keys always win."""

from __future__ import annotations

import json

import pytest

from topo_gate.launchers.command.merge import merge_into_command
from topo_gate.launchers.command.parse import CmdlineError, user_knobs

SGLANG_ARGS = ("--flashinfer-allreduce-fusion-backend", "trtllm", "--disable-custom-all-reduce")
BASE = ["python", "-m", "sglang.launch_server", "--model-path", "m"]


def test_plan_appended_when_user_is_silent() -> None:
    merged = merge_into_command(
        BASE, {"PATH": "/bin"}, SGLANG_ARGS, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}, "sglang"
    )
    assert merged.argv == (*BASE, *SGLANG_ARGS)
    assert merged.env == {"PATH": "/bin", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}
    assert merged.warnings == ()
    assert "--flashinfer-allreduce-fusion-backend trtllm" in merged.added


def test_user_value_wins_in_both_spellings() -> None:
    for given in (
        ["--flashinfer-allreduce-fusion-backend", "mnnvl"],
        ["--flashinfer-allreduce-fusion-backend=mnnvl"],
    ):
        merged = merge_into_command([*BASE, *given], {}, SGLANG_ARGS, {}, "sglang")
        assert merged.argv == (*BASE, *given, "--disable-custom-all-reduce")
        assert len(merged.warnings) == 1 and "yours wins" in merged.warnings[0]


def test_same_value_is_silent() -> None:
    merged = merge_into_command(
        [*BASE, "--flashinfer-allreduce-fusion-backend=trtllm"], {}, SGLANG_ARGS, {}, "sglang"
    )
    assert merged.warnings == ()
    assert merged.argv.count("--disable-custom-all-reduce") == 1


def test_flag_for_the_same_knob_under_another_name_wins() -> None:
    # The user disabled fusion; the profile would enable it: the user's choice stays, with a warning.
    merged = merge_into_command(
        [*BASE, "--enforce-disable-flashinfer-allreduce-fusion"], {}, SGLANG_ARGS, {}, "sglang"
    )
    assert "--flashinfer-allreduce-fusion-backend" not in merged.argv
    assert any("--enforce-disable-flashinfer-allreduce-fusion" in w for w in merged.warnings)


def test_user_env_wins() -> None:
    merged = merge_into_command(
        BASE, {"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}, (), {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}, "vllm"
    )
    assert merged.env["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "1"
    assert merged.warnings and merged.added == ()


VLLM_CC = (
    "--compilation-config",
    '{"pass_config":{"fuse_allreduce_rms":true,"fi_allreduce_fusion_max_size_mb":8.0}}',
)


def effective_config(argv: tuple[str, ...]) -> dict:
    """The compilation config vLLM ends up with for ``argv`` (cmdline reads it as vLLM does: the
    corpus of scripts/cmdline_agreement.py holds it to vLLM's own parser)."""
    knobs = dict(zip(*[iter(user_knobs("vllm", argv, {}).args)] * 2, strict=False))
    return json.loads(knobs["--compilation-config"])


def test_compilation_config_merged_into_users_json() -> None:
    user = ["vllm", "serve", "m", "-cc", '{"level": 3, "pass_config": {"fuse_allreduce_rms": false}}']
    merged = merge_into_command(user, {}, VLLM_CC, {}, "vllm")
    config = effective_config(merged.argv)
    assert config["level"] == 3
    assert config["pass_config"] == {"fuse_allreduce_rms": False, "fi_allreduce_fusion_max_size_mb": 8.0}
    assert any("fuse_allreduce_rms" in w for w in merged.warnings)


def test_compilation_config_inline_equals_form() -> None:
    merged = merge_into_command(
        ["vllm", "serve", "m", '--compilation-config={"level":3}'], {}, VLLM_CC, {}, "vllm"
    )
    assert effective_config(merged.argv) == {
        "level": 3,
        "pass_config": {"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": 8.0},
    }


def test_dotted_user_setting_wins_and_the_rest_joins_its_group() -> None:
    # vLLM appends dotted groups after every explicit config: a second --compilation-config would be
    # replaced by the user's group, so the plan's keys go into that group.
    user = ["vllm", "serve", "m", "-cc.pass_config.fi_allreduce_fusion_max_size_mb=2"]
    merged = merge_into_command(user, {}, VLLM_CC, {}, "vllm")
    assert effective_config(merged.argv) == {
        "pass_config": {"fi_allreduce_fusion_max_size_mb": 2, "fuse_allreduce_rms": True}
    }
    assert "--compilation-config" not in merged.argv
    assert any("fi_allreduce_fusion_max_size_mb=2" in w for w in merged.warnings)


@pytest.mark.parametrize(
    "given",
    [
        ["--compilation_config", '{"pass_config": {"fuse_allreduce_rms": false}}'],  # _ for -
        ["--compilation-c", '{"pass_config": {"fuse_allreduce_rms": false}}'],  # an abbreviation
        ["--compilation_config.pass_config.fuse_allreduce_rms", "false"],  # dotted, underscored
        ["-cc.pass_config.fuse_allreduce_rms=false", "-cc", '{"pass_config": {}}'],  # dotted wins
    ],
)
def test_users_compilation_config_in_any_spelling_is_never_overridden(given: list[str]) -> None:
    merged = merge_into_command(["vllm", "serve", "m", *given], {}, VLLM_CC, {}, "vllm")
    assert effective_config(merged.argv)["pass_config"] == {
        "fuse_allreduce_rms": False,
        "fi_allreduce_fusion_max_size_mb": 8.0,
    }
    assert [w for w in merged.warnings if "fuse_allreduce_rms" in w]


def test_compilation_config_from_a_config_file_is_the_users(tmp_path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("compilation-config:\n  pass_config: {fuse_allreduce_rms: false}\n")
    merged = merge_into_command(["vllm", "serve", "m", "--config", str(config)], {}, VLLM_CC, {}, "vllm")
    assert effective_config(merged.argv)["pass_config"]["fuse_allreduce_rms"] is False


@pytest.mark.parametrize(
    ("launcher", "given"),
    [
        ("vllm", ["--disable-custom"]),  # an abbreviation
        ("vllm", ["--disable_custom_all_reduce"]),  # _ for -
        ("vllm", ["--enable-custom-all-reduce"]),  # the inverse spelling: the user wants it on
        ("vllm", ["--no-disable-custom-all-reduce"]),
        ("sglang", ["--disable-custom"]),
    ],
)
def test_an_abbreviated_or_inverse_user_flag_counts_as_set(launcher: str, given: list[str]) -> None:
    base = ["vllm", "serve", "m"] if launcher == "vllm" else BASE
    merged = merge_into_command([*base, *given], {}, ("--disable-custom-all-reduce",), {}, launcher)
    assert merged.argv == (*base, *given)
    inverse = given[0] in ("--enable-custom-all-reduce", "--no-disable-custom-all-reduce")
    assert bool(merged.warnings) == inverse


def test_a_line_the_launcher_refuses_is_not_merged_into() -> None:
    with pytest.raises(CmdlineError, match="ambiguous"):
        merge_into_command(
            ["vllm", "serve", "m", "--disable-c"], {}, ("--disable-custom-all-reduce",), {}, "vllm"
        )
