"""Secrets never reach a record: the documented rule, case by case (topo_gate/ab/redact.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.ab.redact import REDACTED, redact_argv, redact_text

HF = "hf_" + "a1B2" * 9
OPENAI = "sk-" + "proj" * 8


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["vllm", "bench", "serve", "--api-key", "s3cret"],
            ["vllm", "bench", "serve", "--api-key", REDACTED],
        ),
        (["x", "--api-key=s3cret"], ["x", f"--api-key={REDACTED}"]),
        (["x", "--api_key", "s3cret"], ["x", "--api_key", REDACTED]),
        (["x", "--hf-token", "abc", "--model", "M"], ["x", "--hf-token", REDACTED, "--model", "M"]),
        (["x", "--password", "p", "--db-secret=q"], ["x", "--password", REDACTED, f"--db-secret={REDACTED}"]),
        (
            ["env", "HF_TOKEN=abc", "OPENAI_API_KEY=def", "vllm"],
            ["env", f"HF_TOKEN={REDACTED}", f"OPENAI_API_KEY={REDACTED}", "vllm"],
        ),
        (
            ["x", "--base-url", "https://user:pw@host:8000/v1"],
            ["x", "--base-url", f"https://{REDACTED}@host:8000/v1"],
        ),
        (["x", f"--model={HF}"], ["x", f"--model={REDACTED}"]),
        (
            ["x", "--header", "Authorization: Bearer abcdefgh12345678"],
            ["x", "--header", f"Authorization: Bearer {REDACTED}"],
        ),
        (["x", "http://h/v1?api_key=zzz&model=m"], ["x", f"http://h/v1?api_key={REDACTED}&model=m"]),
        (["x", OPENAI], ["x", REDACTED]),
    ],
)
def test_secrets_are_redacted(argv, expected) -> None:
    assert redact_argv(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "bench", "latency", "--max-tokens", "128", "--tokenizer", "T", "--ssl-keyfile", "k.pem"],
        ["python", "-m", "sglang.benchmark.one_batch", "--model-path", "M", "--tp-size", "2"],
        ["vllm", "-cc.pass_config.fuse_allreduce_rms=false", "--compilation-config", '{"pass_config": {}}'],
        ["trtllm-bench", "--model", "M", "throughput", "--report_json", "r.json", "MAX_TOKENS=8"],
    ],
)
def test_ordinary_commands_are_kept_whole(argv) -> None:
    assert redact_argv(argv) == argv


def test_a_secret_flag_at_the_end_hides_nothing_else() -> None:
    assert redact_argv(["x", "--api-key"]) == ["x", "--api-key"]


def test_output_lines_lose_credentials_of_known_shapes() -> None:
    line = f"connecting to https://bot:pw@hub with {HF}; Total Token Throughput (tokens/sec): 12.5"
    assert (
        redact_text(line)
        == f"connecting to https://{REDACTED}@hub with {REDACTED}; Total Token Throughput (tokens/sec): 12.5"
    )


@given(
    flag=st.sampled_from(["--api-key", "--hf-token", "--token", "--auth", "--client-secret", "--api_key"]),
    secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=40),
    attached=st.booleans(),
)
def test_a_secret_option_value_never_survives(flag, secret, attached) -> None:
    argv = (
        ["vllm", "bench", "serve", f"{flag}={secret}"]
        if attached
        else ["vllm", "bench", "serve", flag, secret]
    )
    assert all(secret not in token for token in redact_argv(argv))
