"""How many tokens a secret option's value spans, and what stays (topo_gate/ab/redact.py, docs/ab.md
"Redaction"): the launchers' parsers give an option its values (one for ``--hf-token``, every word up
to the next option for vLLM's ``--api-key``, none for a switch), and the redaction hides exactly those:
no secret left after them, and what ran still readable in the record."""

from __future__ import annotations

import pytest

from topo_gate.ab.redact import REDACTED, redact_argv, redact_text, secret_values

R = REDACTED


@pytest.mark.parametrize(
    "option, count",
    [
        ("--hf-token", 1),
        ("--hf_token", 1),
        ("--api-key", -1),  # vLLM: nargs='+'
        ("--password", 1),  # in no launcher's table: named a secret by its words, one value
        ("--allow-credentials", 0),
        ("--no-allow-credentials", 0),  # a switch's negative form takes no value either
        ("--no_allow_credentials", 0),
        # Exact options of a parser that are no secret, though they abbreviate one
        # (--ssl-keyfile-password) or are the negative of a switch: nothing to hide.
        ("--ssl-keyfile", None),
        ("--ssl_keyfile", None),
        ("--no-enable-prefix-caching", None),
        ("--disable-log-requests", None),
        ("--", None),  # the end of options, no option's name
        ("--a", -1),  # ambiguous, --api-key among what it may mean: the most a reading may hide
    ],
)
def test_an_option_counts_the_values_its_launcher_reads(option, count) -> None:
    assert secret_values(option) == count


@pytest.mark.parametrize(
    "argv, expected",
    [
        # nargs='+': every value up to the next option, a short one (-tp) included.
        (
            ["vllm", "serve", "M", "--api-key", "k1", "-tp", "2"],
            ["vllm", "serve", "M", "--api-key", R, "-tp", "2"],
        ),
        (
            ["vllm", "serve", "M", "--api-key", "k1", "k2", "-tp", "2"],
            ["vllm", "serve", "M", "--api-key", R, R, "-tp", "2"],
        ),
        (
            ["vllm", "serve", "M", "--api-key", "k1", "k2", "--model", "M"],
            ["vllm", "serve", "M", "--api-key", R, R, "--model", "M"],
        ),
        # The first value is a value even when it begins with "-" (a key may): hidden, and what
        # follows it still ends the list.
        (
            ["vllm", "serve", "--api-key", "-k3y", "-tp", "2"],
            ["vllm", "serve", "--api-key", R, "-tp", "2"],
        ),
        (["vllm", "serve", "--api-key", "-k3y", "k2"], ["vllm", "serve", "--api-key", R, R]),
        # One value: the token after it is the launcher's again (a positional model, a file).
        (["vllm", "serve", "--hf-token", "T", "M"], ["vllm", "serve", "--hf-token", R, "M"]),
        (
            ["vllm", "serve", "--hf-token", "T", "M", "extra"],
            ["vllm", "serve", "--hf-token", R, "M", "extra"],
        ),
        (["tool", "--password", "p", "input.txt"], ["tool", "--password", R, "input.txt"]),
        (["tool", "--password", "-p", "input.txt"], ["tool", "--password", R, "input.txt"]),
        # A value given with "=": nothing after the option is its value.
        (["vllm", "serve", "--hf-token=T", "M"], ["vllm", "serve", f"--hf-token={R}", "M"]),
        (["vllm", "serve", "--api-key=k1", "M", "x"], ["vllm", "serve", f"--api-key={R}", "M", "x"]),
        # A switch (and its negative form) takes no value.
        (["vllm", "serve", "--allow-credentials", "M"], ["vllm", "serve", "--allow-credentials", "M"]),
        (
            ["vllm", "serve", "--no-allow-credentials", "M"],
            ["vllm", "serve", "--no-allow-credentials", "M"],
        ),
        (
            ["vllm", "serve", "M", "--no-allow-credentials", "-tp", "2"],
            ["vllm", "serve", "M", "--no-allow-credentials", "-tp", "2"],
        ),
        (
            ["vllm", "serve", "--no_allow_credentials", "M"],
            ["vllm", "serve", "--no_allow_credentials", "M"],
        ),
        # A split header: the scheme word is kept, the one token after it is the credential.
        (
            ["curl", "-H", "Authorization:", "Bearer", "tok", "https://host/v1"],
            ["curl", "-H", "Authorization:", "Bearer", R, "https://host/v1"],
        ),
        (
            ["curl", "-H", "Authorization:", "tok", "https://host/v1"],
            ["curl", "-H", "Authorization:", R, "https://host/v1"],
        ),
    ],
)
def test_a_secret_option_hides_exactly_its_values(argv, expected) -> None:
    assert redact_argv(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        # vLLM reads "_" as "-": --ssl_keyfile is SGLang's --ssl-keyfile, a file's name, not the
        # --ssl-keyfile-password it abbreviates.
        ["python", "-m", "sglang.launch_server", "--ssl_keyfile", "k.pem", "--port", "30000"],
        ["python", "-m", "sglang.launch_server", "--ssl-keyfile", "k.pem"],
        # A negative switch's name with a value attached: no secret, the record says what ran.
        ["vllm", "serve", "M", "--no-enable-prefix-caching=true"],
        ["vllm", "serve", "M", "--disable-log-requests=1"],
        # "--" names no option; "--=x" is a token the launcher reads as it will, kept.
        ["tool", "--=abc"],
        ["tool", "--", "--=abc"],
        # A value that only holds a secret word is no secret name.
        ["env", "MODE=token", "app"],
    ],
)
def test_what_names_no_secret_is_kept_whole(argv) -> None:
    assert redact_argv(argv) == argv


@pytest.mark.parametrize(
    "token, expected",
    [
        ("DB_PASSWORD=correct horse battery", f"DB_PASSWORD={R}"),  # env "DB_PASSWORD=a b c": all of it
        ("HF_TOKEN=", f"HF_TOKEN={R}"),
        ("HF_TOKEN=VALUE", f"HF_TOKEN={R}"),  # a command line's value is no usage line's placeholder
    ],
)
def test_a_secret_variable_hides_its_whole_value(token, expected) -> None:
    assert redact_argv(["env", token, "app"]) == ["env", expected, "app"]


@pytest.mark.parametrize("option", ["-+-token", "-,api-key", "-*-password"])
def test_any_dash_led_token_that_names_a_secret_is_an_option(option) -> None:
    # A wrapper's own option syntax may lead with any character after the dash: the rule reads the
    # words of the name, whatever punctuation they follow.
    assert redact_argv(["wrapper", option, "s3cret", "x"]) == ["wrapper", option, R, "x"]


@pytest.mark.parametrize(
    "text, expected",
    [
        # The next option after a secret option is no value of it.
        ("vllm serve M --hf-token -tp 2", "vllm serve M --hf-token -tp 2"),
        ("vllm serve M --api-key -tp 2", "vllm serve M --api-key -tp 2"),
        # ... but attached with "=", whatever follows is the value: a secret may begin with "-".
        ("vllm serve M --hf-token=-s3cret -tp 2", f"vllm serve M --hf-token={R} -tp 2"),
        ("vllm serve M --api-key=-s3cret", f"vllm serve M --api-key={R}"),
        # One value: the words after it are the launcher's (a positional model).
        ("vllm serve --hf-token abc served-model", f"vllm serve --hf-token {R} served-model"),
        ("vllm serve --hf-token=abc served-model", f"vllm serve --hf-token={R} served-model"),
        # nargs='+': every word up to the next option.
        ("vllm serve --api-key k1 k2 -tp 2", f"vllm serve --api-key {R} {R} -tp 2"),
        ("vllm serve --api-key k1 k2", f"vllm serve --api-key {R} {R}"),
        # Any Unicode space may separate an option from its value in a tail line (a non-breaking
        # space from a formatted table): read as a blank, not as "=".
        ("--api-key\u00a0k1 k2", f"--api-key\u00a0{R} {R}"),
        ("--api-key\tk1 k2", f"--api-key\t{R} {R}"),
        ("--hf-token\u00a0-tp 2", "--hf-token\u00a0-tp 2"),
        ("--hf-token\u00a0abc M", f"--hf-token\u00a0{R} M"),
    ],
)
def test_a_secret_option_in_text_hides_exactly_its_values(text, expected) -> None:
    assert redact_text(text) == expected
