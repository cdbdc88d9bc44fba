"""GitHub's app installation (``ghs_``), user-to-server (``ghu_``) and OAuth (``gho_``) tokens are
hidden in every form a record may hold them: bare, in a URL's userinfo as ``git`` writes a clone URL
with an app token, in an env assignment, an Authorization header, a JSON value, quoted; in a command
line and in free text alike (topo_gate/ab/redact.py, rule 4's shapes)."""

from __future__ import annotations

import pytest

from topo_gate.ab.redact import REDACTED, redact_argv, redact_text

#: Each prefix with a body of GitHub's length (36 characters), none of them a secret.
TOKENS = {prefix: prefix + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8" for prefix in ("ghs_", "ghu_", "gho_")}

#: Each form as a record may hold it; ``{t}`` is the token.
FORMS = {
    "bare": "{t}",
    "in a sentence": "clone failed with {t} after 3 tries",
    "url userinfo": "https://x-access-token:{t}@github.com/org/repo.git",
    "url, token as user": "https://{t}@github.com/org/repo.git",
    "env assignment, secret name": "GH_TOKEN={t}",
    "env assignment, plain name": "GIT_CREDS_VALUE={t}",
    "authorization header": "Authorization: token {t}",
    "bearer header": "Authorization: Bearer {t}",
    "json value, secret key": '{{"token": "{t}"}}',
    "json value, plain key": '{{"value": "{t}"}}',
    "double quoted": '"{t}"',
    "single quoted": "'{t}'",
    "after a comma": "a,{t},b",
}


@pytest.mark.parametrize("prefix", list(TOKENS))
@pytest.mark.parametrize("form", list(FORMS))
def test_the_token_is_gone_from_free_text(prefix: str, form: str) -> None:
    token = TOKENS[prefix]
    redacted = redact_text(FORMS[form].format(t=token))
    assert token[4:] not in redacted and REDACTED in redacted


@pytest.mark.parametrize("prefix", list(TOKENS))
@pytest.mark.parametrize("form", list(FORMS))
def test_the_token_is_gone_from_a_command_line(prefix: str, form: str) -> None:
    token = TOKENS[prefix]
    argv = ["git", "clone", FORMS[form].format(t=token), "--depth", "1"]
    redacted = redact_argv(argv)
    assert not any(token[4:] in item for item in redacted)
    assert redacted[:2] == ["git", "clone"] and redacted[-2:] == ["--depth", "1"]


def test_a_word_that_only_starts_like_one_is_kept() -> None:
    # Too short for a token: a branch or file name such as "ghs_fix" stays readable.
    assert redact_text("checked out ghs_fix and gho_notes") == "checked out ghs_fix and gho_notes"
