"""Secrets out of a command line before it is written into a record that may be shared. Pure, stdlib.

The rule (docs/ab.md "Redaction"), applied token by token:

1. An option whose name, split at ``-``, ``_`` and ``.``, has a word among ``SECRET_WORDS``
   (``--api-key``, ``--hf-token``, ``--api_key``, ``--password``; not ``--max-tokens`` or
   ``--tokenizer``, whose words are ``tokens`` and ``tokenizer``): its value, given as
   ``--opt=VALUE`` or as the next token, becomes ``<redacted>``.
2. A ``NAME=VALUE`` token whose NAME is an environment variable name with such a word
   (``HF_TOKEN=...``, ``OPENAI_API_KEY=...`` after ``env``): VALUE becomes ``<redacted>``.
3. Anywhere in any token: the credentials of a URL (``https://user:pass@host`` ->
   ``https://<redacted>@host``), the value of a URL query parameter named like a secret
   (``?token=...``), a ``Bearer``/``Basic`` credential, and tokens of well-known shapes
   (Hugging Face ``hf_...``, OpenAI ``sk-...``, GitHub ``ghp_...``, AWS ``AKIA...``, Slack ``xox.-...``).

Over-redaction is the safe side: a value that only looks like a secret is hidden too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

REDACTED = "<redacted>"
SECRET_WORDS = frozenset(
    {
        "token",
        "key",
        "apikey",
        "secret",
        "password",
        "passwd",
        "credential",
        "credentials",
        "auth",
        "authorization",
    }
)
_WORD_SPLIT = re.compile(r"[-_.]+")
_ENV_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_QUERY_SECRET = re.compile(
    r"([?&](?:[A-Za-z0-9_-]*(?:token|key|secret|password|signature|sig)[A-Za-z0-9_-]*)=)[^&#\s]+",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_SHAPES = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}|\bAKIA[0-9A-Z]{16}\b|\bxox[abprs]-[A-Za-z0-9-]{10,}"
)


def secret_name(name: str) -> bool:
    """Whether an option or variable name (``--api-key``, ``HF_TOKEN``) names a secret."""
    words = {word for word in _WORD_SPLIT.split(name.lstrip("-").lower()) if word}
    return bool(words & SECRET_WORDS)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with every secret replaced by ``<redacted>`` (module docstring, rules 1-3)."""
    out: list[str] = []
    hide_next = False
    for token in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if token.startswith("-") and len(token) > 1:
            name, eq, _value = token.partition("=")
            if secret_name(name):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(token)
                    hide_next = True
                continue
        assignment = _ENV_ASSIGNMENT.fullmatch(token)
        if assignment and secret_name(assignment.group(1)):
            out.append(f"{assignment.group(1)}={REDACTED}")
            continue
        out.append(redact_text(token))
    return out


def redact_text(text: str) -> str:
    """Rule 3 on free text (a token, an output line): URL credentials, secret query values,
    authorization credentials and well-known token shapes."""
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _SHAPES.sub(REDACTED, text)
