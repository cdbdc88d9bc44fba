"""No secret in any form a launcher reads survives redaction: the issue's spellings (a data file), a
generated corpus of spellings, and every error path of the CLI (a usage error, a reader's error)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.ab.redact import REDACTED, redact_argv, redact_text, secret_values
from topo_gate.cli import main
from topo_gate.launchers.command.options import table

CASES = yaml.safe_load((Path(__file__).parent / "data" / "secret-spellings.yaml").read_text())


def _leaks(secrets: list[str], *texts: str) -> list[str]:
    return [secret for secret in secrets for text in texts if secret in text]


@pytest.mark.parametrize("case", CASES, ids=[case["why"] for case in CASES])
def test_each_spelling_of_the_issue_is_redacted(case) -> None:
    argv = case["argv"]
    redacted = redact_argv(argv)
    assert len(redacted) == len(argv) and REDACTED in " ".join(redacted)
    assert _leaks(case["secrets"], *redacted) == []
    assert _leaks(case["secrets"], redact_text(" ".join(argv)), redact_text(shlex.join(argv))) == []


def test_abbreviations_are_read_as_the_launchers_parsers_read_them() -> None:
    assert secret_values("--api-ke") == -1  # vLLM's --api-key takes one or more keys
    assert secret_values("--hf-tok") == 1 and secret_values("--hf_tok") == 1
    assert secret_values("--ssl-keyfile") is None  # an option of its own, not --ssl-keyfile-password
    assert secret_values("--allow-credentials") == 0  # a switch: no value to hide
    assert secret_values("--max-tokens") is None and secret_values("--tokenizer") is None


def _abbreviations(option: str) -> list[str]:
    exact = {name for launcher in ("vllm", "sglang") for name in table(launcher).by_option}
    return [
        option[:end] for end in range(5, len(option) + 1) if option[:end] not in exact or end == len(option)
    ]


_SECRET = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/@:+=._~,;&}"),
    min_size=6,
    max_size=24,
).map(lambda text: "Zq" + text)
_OPTIONS = [
    *_abbreviations("--api-key"),
    *_abbreviations("--hf-token"),
    *_abbreviations("--admin-api-key"),
    *_abbreviations("--ssl-keyfile-password"),
    "--api_key",
    "--hf_token",
    "--token",
    "--password",
    "--client-secret",
]
_HEADERS = ["Authorization", "authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Auth-Token"]
_SCHEMES = ["", "Bearer ", "Basic ", "token ", "Token "]
_VARIABLES = ["HF_TOKEN", "OPENAI_API_KEY", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"]


@st.composite
def _spelling(draw) -> tuple[list[str], str]:
    """One secret, spelled one way a command line carries it: (tokens, secret)."""
    secret = draw(_SECRET)
    form = draw(
        st.sampled_from(
            ["option", "attached", "env", "header", "header-flag", "split-header", "url", "inner"]
        )
    )
    if form in ("option", "attached", "inner"):
        option = draw(st.sampled_from(_OPTIONS))
        tokens = [f"{option}={secret}"] if form == "attached" else [option, secret]
        return ([shlex.join(["--model", "M", *tokens])] if form == "inner" else tokens), secret
    if form == "env":
        return [f"{draw(st.sampled_from(_VARIABLES))}={secret}"], secret
    header, scheme = draw(st.sampled_from(_HEADERS)), draw(st.sampled_from(_SCHEMES))
    if form == "header":
        return ["-H", f"{header}: {scheme}{secret}"], secret
    if form == "header-flag":
        return [f"--header={header}:{scheme}{secret}"], secret
    if form == "split-header":
        return ["-H", f"{header}:", *scheme.split(), secret], secret
    return [f"https://user:{secret}@host:8000/v1"], secret


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(_spelling(), min_size=1, max_size=4, unique_by=lambda piece: piece[1]),
    ordinary=st.booleans(),
)
def test_a_generated_corpus_of_secret_spellings_never_survives(pieces, ordinary) -> None:
    argv = ["vllm", "bench", "serve"]
    for tokens, _ in pieces:
        argv += tokens
        if ordinary:
            argv += ["--model", "M", "-tp", "2"]
    secrets = [secret for _, secret in pieces]
    redacted = redact_argv(argv)
    assert _leaks(secrets, *redacted) == [], (argv, redacted)
    assert _leaks(secrets, redact_text(" ".join(argv))) == []
    # Shell-quoted as a log line would print it (a quoted value inside a quoted value aside: an inner
    # command line's own quotes quoted again are no text a program prints).
    flat = [secret for tokens, secret in pieces if shlex.join(tokens).count("'") <= 2]
    assert _leaks(flat, redact_text(shlex.join(argv))) == []
    if ordinary:  # what is no secret stays: the record still says what ran
        assert redacted.count("--model") == len(pieces) and "-tp" in redacted


@pytest.mark.parametrize(
    "argv",
    [
        ["recommend", "p.yaml", "--tp", "2", "--launcher", "vllm", "--token=SECRET1"],
        ["recommend", "p.yaml", "--tp", "2", "--launcher", "vllm", "extra", "--api-key=SECRET1"],
        ["exec", "--profile", "p.yaml", "--tp", "2", "--api-key=SECRET1", "--", "vllm", "serve"],
        [
            "exec",
            "--profile",
            "p.yaml",
            "--strict",
            "--tp",
            "2",
            "--",
            "vllm",
            "serve",
            "M",
            "--a=SECRET1",
            "-tp",
            "2",
        ],
        [
            "exec",
            "--profile",
            "p.yaml",
            "--strict",
            "--",
            "vllm",
            "serve",
            "M",
            "-tp",
            "2",
            "--hf-tok",
            "SECRET1",
        ],
        ["ab", "--profile", "p.yaml", "--hf-token=SECRET1", "--", "vllm", "bench", "latency"],
        ["ab", "--profile", "p.yaml", "--tp", "2", "--", "./missing.sh", "--api-key", "SECRET1"],
        ["show", "p.yaml", "--hf-token=SECRET1"],
    ],
)
def test_no_error_path_prints_a_secret(capsys, tmp_path, monkeypatch, argv) -> None:
    # exec's cases are under --strict: a missing profile ends them before exec would replace pytest.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vllm").write_text("#!/bin/sh\n")
    (tmp_path / "vllm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    code = main(argv)
    out, err = capsys.readouterr()
    assert code != 0
    assert "SECRET1" not in out + err, err


def test_a_reader_error_quoting_the_secret_is_redacted(capsys, tmp_path) -> None:
    """argparse quotes the whole token of an ambiguous abbreviation: ``--a=SECRET could match ...``."""
    profile = Path(__file__).resolve().parents[2] / "profiles" / "h200-x2" / "h7168-run1.yaml"
    code = main(
        ["recommend", str(profile), "--tp", "2", "--launcher", "vllm", "--launcher-args", "--a=SECRET1"]
    )
    err = capsys.readouterr().err
    assert code == 0 and "ambiguous option: --a=<redacted> could match" in err and "SECRET1" not in err
