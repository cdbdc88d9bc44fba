"""The edges of two redaction rules (topo_gate/ab/redact.py), each pinned by its exact output: a URL's
userinfo (rule 4: from the scheme, a letter-led run of scheme characters right before ``:/``, to the
run's last "@"), and a usage line's placeholder value (``KEY=VALUE``), which is no secret to hide."""

from __future__ import annotations

import pytest

from topo_gate.ab.outcome import _redacted_item
from topo_gate.ab.redact import REDACTED, redact_text

R = REDACTED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A ":/" with no scheme before it, then a URL in the same run: the URL's userinfo still goes.
        (":/https://u:secret@host", f":/https://{R}@host"),
        # A one-letter scheme right after a character no scheme holds.
        ("url=x:/user:secret@host", f"url=x:/{R}@host"),
        # Userinfo that starts with a character sorting before "/" is userinfo all the same.
        ("https://-user:pw@host", f"https://{R}@host"),
        ("https:/.user:pw@host", f"https:/{R}@host"),
        # Empty userinfo: the "@" right after the slashes.
        ("https://@host", f"https://{R}@host"),
        # An "@" and a URL in other runs of the text: nothing to hide.
        ("user@host and https://x.y/z", "user@host and https://x.y/z"),
        ("mail me@host.org, see https://x.y", "mail me@host.org, see https://x.y"),
    ],
)
def test_url_userinfo(text: str, expected: str) -> None:
    assert redact_text(text) == expected


LONG = "x" * 300  # past the small integers CPython keeps as singletons


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("expected API_KEY=VALUE", "expected API_KEY=VALUE"),
        ("set API_KEY=VALUE and retry", "set API_KEY=VALUE and retry"),
        ("usage: --env HF_TOKEN=VALUE...", "usage: --env HF_TOKEN=VALUE..."),
        ("TOKEN=V\tthen", "TOKEN=V\tthen"),
        (f"{LONG} API_KEY=VALUE", f"{LONG} API_KEY=VALUE"),
        (f"{LONG} API_KEY=VALUE more", f"{LONG} API_KEY=VALUE more"),
        # A value that only starts like a placeholder is a value.
        ("API_KEY=VALUES", f"API_KEY={R}"),
        ("API_KEY=Vx", f"API_KEY={R}"),
        (f"{LONG} API_KEY=VALUEx", f"{LONG} API_KEY={R}"),
    ],
)
def test_a_placeholder_value_is_kept_and_a_real_one_hidden(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        # An option the parser takes as an abbreviation of --hf-token: hidden as the option it is.
        ("--hf-tok=abc123", f"--hf-tok={R}"),
        ("HF_TOKEN=two words", f"HF_TOKEN={R}"),
        ("OTHER=hf_" + "a" * 30, f"OTHER={R}"),
        ("HF_TOKEN", "HF_TOKEN"),  # a bare name: no value to hide, and none to make up
        ("--enforce-eager", "--enforce-eager"),
    ],
)
def test_an_added_item_of_an_arm_is_redacted_as_what_it_is(item: str, expected: str) -> None:
    assert _redacted_item(item) == expected
