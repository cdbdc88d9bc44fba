"""Secrets named in camelCase, inside JSON, and in URLs a path library has normalised
(topo_gate/ab/redact.py), each at its edge: the name just a secret's and just not one; and the error
printer (cli/_errors.py) hides them in every command's error line."""

from __future__ import annotations

import pytest

from topo_gate.ab.redact import REDACTED, redact_argv, redact_text, secret_name
from topo_gate.cli import main

R = REDACTED


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("--authToken", True),
        ("--accessToken", True),
        ("hfToken", True),
        ("apiKey", True),
        ("HFToken", True),
        ("xApiKey", True),
        ("clientSecret", True),
        ("--maxTokens", False),  # "tokens" is no secret's word
        ("tokenizerMode", False),
        ("keyframes", False),
        ("monkeyPatch", False),  # "key" inside a word is no word
    ],
)
def test_camel_case_names_are_read_word_by_word(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["bench", "--authToken", "S1", "--n", "3"], ["bench", "--authToken", R, "--n", "3"]),
        (["bench", "--accessToken=S2"], ["bench", f"--accessToken={R}"]),
        (["bench", "--maxTokens", "512"], ["bench", "--maxTokens", "512"]),
        (
            ["--server-config", '{"hfToken": "S3", "apiKey": "S4", "maxTokens": 8}'],
            ["--server-config", f'{{"hfToken": {R}, "apiKey": {R}, "maxTokens": 8}}'],
        ),
        (
            ["--server-config", "{'authToken':'S5','tokenizerMode':'auto'}"],
            ["--server-config", f"{{'authToken':{R},'tokenizerMode':'auto'}}"],
        ),
    ],
)
def test_camel_case_options_and_json_keys_are_hidden(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:SECRET@host/node.yaml", f"https://{R}@host/node.yaml"),
        ("https:/user:SECRET@host/node.yaml", f"https:/{R}@host/node.yaml"),  # as pathlib writes it
        ("1abc://u:p@h", f"1abc://{R}@h"),
        ("s3://bucket/key@v2", f"s3://{R}@v2"),
        ("https:/host/node.yaml", "https:/host/node.yaml"),  # no "@": no userinfo
        ("user@host:/srv/node.yaml", "user@host:/srv/node.yaml"),  # the "@" before the scheme's ":/"
        ("123://u:p@h", "123://u:p@h"),  # no letter: no scheme
        (
            "see https://a.example/x and mail me@example.org",
            "see https://a.example/x and mail me@example.org",
        ),
        ("?token=abc&page=2", f"?token={R}&page=2"),
        ("?page=2?token=abc", f"?page=2?token={R}"),
        ("?pages=2", "?pages=2"),
        # An option followed by blanks, then the next option or nothing: no value to hide.
        ("--api-key   --x", "--api-key   --x"),
        ("--api-key   ", "--api-key   "),
        ("--api-key   S  T --x", f"--api-key   {R}  {R} --x"),
        ("HF_TOKEN =   S", f"HF_TOKEN =   {R}"),
    ],
)
def test_urls_query_values_and_options_in_free_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "https://user:SECRET@host/node.yaml"],
        ["show", "https://user:SECRET@host/node.yaml"],
        ["report", "https://user:SECRET@host/node.yaml", "--out", "r"],
        ["diff", "https://user:SECRET@host/a.yaml", "https://user:SECRET@host/b.yaml"],
    ],
)
def test_a_url_with_userinfo_given_as_a_path_is_hidden_in_the_error_line(
    argv, capsys, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "SECRET" not in err and f"{R}@host" in err
