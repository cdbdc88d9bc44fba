"""Folding a plan into the user's command: the user's own flags, env and config keys always win."""

from __future__ import annotations

import json

from topo_gate.launchers.merge import merge

SGLANG_ARGS = ("--flashinfer-allreduce-fusion-backend", "trtllm", "--disable-custom-all-reduce")
BASE = ["python", "-m", "sglang.launch_server", "--model-path", "m"]


def test_plan_appended_when_user_is_silent() -> None:
    merged = merge(BASE, {"PATH": "/bin"}, SGLANG_ARGS, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}, "sglang")
    assert merged.argv == (*BASE, *SGLANG_ARGS)
    assert merged.env == {"PATH": "/bin", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}
    assert merged.warnings == ()
    assert "--flashinfer-allreduce-fusion-backend trtllm" in merged.added


def test_user_value_wins_in_both_spellings() -> None:
    for given in (
        ["--flashinfer-allreduce-fusion-backend", "mnnvl"],
        ["--flashinfer-allreduce-fusion-backend=mnnvl"],
    ):
        merged = merge([*BASE, *given], {}, SGLANG_ARGS, {}, "sglang")
        assert merged.argv == (*BASE, *given, "--disable-custom-all-reduce")
        assert len(merged.warnings) == 1 and "yours wins" in merged.warnings[0]


def test_same_value_is_silent() -> None:
    merged = merge([*BASE, "--flashinfer-allreduce-fusion-backend=trtllm"], {}, SGLANG_ARGS, {}, "sglang")
    assert merged.warnings == ()
    assert merged.argv.count("--disable-custom-all-reduce") == 1


def test_flag_for_the_same_knob_under_another_name_wins() -> None:
    # The user disabled fusion; the profile would enable it: the user's choice stays, with a warning.
    merged = merge([*BASE, "--enforce-disable-flashinfer-allreduce-fusion"], {}, SGLANG_ARGS, {}, "sglang")
    assert "--flashinfer-allreduce-fusion-backend" not in merged.argv
    assert any("--enforce-disable-flashinfer-allreduce-fusion" in w for w in merged.warnings)


def test_user_env_wins() -> None:
    merged = merge(
        BASE, {"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}, (), {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}, "vllm"
    )
    assert merged.env["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "1"
    assert merged.warnings and merged.added == ()


VLLM_CC = (
    "--compilation-config",
    '{"pass_config":{"fuse_allreduce_rms":true,"fi_allreduce_fusion_max_size_mb":8.0}}',
)


def _config_of(argv: tuple[str, ...], flag: str) -> dict:
    for index, token in enumerate(argv):
        if token == flag:
            return json.loads(argv[index + 1])
        if token.startswith(flag + "="):
            return json.loads(token.partition("=")[2])
    raise AssertionError(f"{flag} not in {argv}")


def test_compilation_config_merged_into_users_json() -> None:
    user = ["vllm", "serve", "m", "-cc", '{"level": 3, "pass_config": {"fuse_allreduce_rms": false}}']
    merged = merge(user, {}, VLLM_CC, {}, "vllm")
    config = _config_of(merged.argv, "-cc")
    assert config["level"] == 3
    assert config["pass_config"] == {"fuse_allreduce_rms": False, "fi_allreduce_fusion_max_size_mb": 8.0}
    assert "--compilation-config" not in merged.argv
    assert any("fuse_allreduce_rms" in w for w in merged.warnings)


def test_compilation_config_inline_equals_form() -> None:
    merged = merge(["vllm", "serve", "m", '--compilation-config={"level":3}'], {}, VLLM_CC, {}, "vllm")
    assert _config_of(merged.argv, "--compilation-config")["pass_config"]["fuse_allreduce_rms"] is True


def test_dotted_override_wins_and_rest_is_appended() -> None:
    user = ["vllm", "serve", "m", "-cc.pass_config.fi_allreduce_fusion_max_size_mb=2"]
    merged = merge(user, {}, VLLM_CC, {}, "vllm")
    assert _config_of(merged.argv, "--compilation-config") == {"pass_config": {"fuse_allreduce_rms": True}}
    assert any("fi_allreduce_fusion_max_size_mb=2" in w for w in merged.warnings)
