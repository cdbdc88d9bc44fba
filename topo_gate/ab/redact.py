"""Secrets out of a command line, or any text, before it is written into a record that may be shared
or printed on a terminal. Pure; the launchers' option tables are its only data.

The rule (docs/ab.md "Redaction"):

1. An option that names a secret, read as the launcher's parser reads it: its name (split at ``-``,
   ``_`` and ``.``) has a word among ``SECRET_WORDS`` (``--api-key``, ``--hf_token``,
   ``--password``; not ``--max-tokens`` or ``--tokenizer``), or it is an abbreviation argparse takes
   for such an option of a launcher's parser (``--api-ke``, ``--hf-tok``: the same option tables
   ``exec`` reads CMD with, ``launchers.cmdline_table``). Its values, given as ``--opt=VALUE`` or as
   the tokens it takes (all of ``--api-key A B`` where the parser takes several), become
   ``<redacted>``.
2. ``NAME=VALUE`` and ``NAME: VALUE`` where NAME is such a name (``HF_TOKEN=...``, a header
   ``Authorization: token ...``, ``X-Api-Key: ...``, ``--header=Authorization:...``): VALUE (after an
   authorization scheme word, which is kept) becomes ``<redacted>``.
3. One argument holding several (``bash -c "vllm serve --api-key S"``, a wrapper's ``--args '--hf-token
   S'``): rules 1 and 2 apply inside it as in free text.
4. Anywhere in any token or text: URL userinfo whatever it holds (``https://u:p/@ss@host`` ->
   ``https://<redacted>@host``), secret-named query values (``?token=...``), ``Bearer``/``Basic``
   credentials, and tokens of well-known shapes (Hugging Face ``hf_...``, OpenAI ``sk-...``, GitHub
   ``ghp_...``, AWS ``AKIA...``, Slack ``xox.-...``).

``redact_text`` applies 1, 2 and 4 to free text: an output tail, a reason, an error line.
Over-redaction is the safe side: a value that only looks like a secret is hidden too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

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
        "cookie",
    }
)
#: The launchers whose parsers are argparse (abbreviations): their option tables name the secrets.
_ARGPARSE_LAUNCHERS = ("vllm", "sglang")
_WORD_SPLIT = re.compile(r"[-_.]+")
_ENV_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
# Userinfo is everything between "scheme://" and the last "@" of the run of non-blank characters:
# a password may hold "/", "@" or ":" (typed unencoded), so no character class can end it earlier.
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)\S*@")
_QUERY_SECRET = re.compile(
    r"([?&](?:[A-Za-z0-9_-]*(?:token|key|secret|password|signature|sig)[A-Za-z0-9_-]*)=)[^&#\s]+",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_SHAPES = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}|\bAKIA[0-9A-Z]{16}\b|\bxox[abprs]-[A-Za-z0-9-]{10,}"
)
# A value: quoted, or every non-blank character (a secret may hold any of ",;&}/@:").
_VALUE = r"""(?:"[^"]*"?|'[^']*'?|[^\s"']\S*)"""
# The words of an Authorization header's value that name its scheme, kept: the credential follows.
_SCHEME = r"(?:(?:Bearer|Basic|Token|Digest|Bot|ApiKey|Key|Negotiate|AWS4-HMAC-SHA256)\s+)?"
#: What a usage line writes for a value ("expected KEY=VALUE"): no secret to hide.
_PLACEHOLDERS = frozenset({"VALUE", "V", "...", "VALUE..."})
_HEADER_NAME = re.compile(r"[A-Za-z0-9_-]+:")
# NAME=VALUE / NAME: VALUE anywhere in a text (a header, a JSON or YAML key, an assignment); not a
# file's name in a path ("/etc/app/api-key.yaml: line 3" is where an error is, not a secret).
_NAMED_VALUE = re.compile(
    rf"""(?<![\w./-])(?P<name>[A-Za-z_][\w.-]*)(?P<sep>["']?\s*(?:=|:)\s*)(?P<scheme>{_SCHEME})(?P<value>{_VALUE})""",
    re.IGNORECASE,
)
# An option and its value inside a text: "--api-key S", "--hf-tok=S", "-H Authorization: ...".
_OPTION_VALUE = re.compile(
    rf"""(?<![\w-])(?P<name>--?[A-Za-z][\w.-]*)(?P<sep>=|\s+)(?!--)(?P<value>{_VALUE})(?P<more>(?:\s+(?![-\s]){_VALUE})*)"""
)


def secret_name(name: str) -> bool:
    """Whether an option, variable or header name (``--api-key``, ``HF_TOKEN``, ``X-Api-Key``) names a
    secret by its words."""
    words = {word for word in _WORD_SPLIT.split(name.lstrip("-").lower()) if word}
    return bool(words & SECRET_WORDS)


def secret_values(option: str) -> int | None:
    """How many tokens after ``option`` (no ``=VALUE``) hold its secret: 0 for a switch, -1 for "every
    token up to the next option" (``nargs='+'``), None when ``option`` names no secret.

    Read as the launchers' parsers read it: an exact option of a parser is that option; otherwise
    (argparse's abbreviations, ``_`` for ``-`` as vLLM rewrites it) any secret option it abbreviates
    counts -- an ambiguous abbreviation the launcher refuses is hidden too.
    """
    found = _abbreviated(option) if option.startswith("--") and len(option) > 2 else None
    if found is not None:
        return found
    return 1 if secret_name(option) else None


def _abbreviated(option: str) -> int | None:
    exact, options = _secret_options()
    for spelled in (option, option[:2] + option[2:].replace("_", "-")):
        if spelled in exact:
            return exact[spelled]
    for spelled in (option, option[:2] + option[2:].replace("_", "-")):
        taken = [count for name, count in options if name.startswith(spelled)]
        if taken:
            return max(taken, key=lambda count: (count < 0, count))
    return None


@cache
def _secret_options() -> tuple[dict[str, int | None], tuple[tuple[str, int], ...]]:
    """Every long option of the argparse launchers' parsers: its secret value count (None: not a
    secret), and the secret ones alone, for abbreviations."""
    from topo_gate.launchers.cmdline_table import table

    exact: dict[str, int | None] = {}
    secret: list[tuple[str, int]] = []
    for launcher in _ARGPARSE_LAUNCHERS:
        for action in table(launcher).actions:
            count = _count(action.nargs) if secret_name(action.dest) else None
            for option in (*action.options, *action.negative):
                if not option.startswith("--"):
                    continue
                if exact.get(option) is None:
                    exact[option] = 0 if option in action.negative and count is not None else count
                if count is not None and option not in action.negative:
                    secret.append((option, count))
    return exact, tuple(secret)


def _count(nargs: int | str | None) -> int:
    if nargs is None or nargs == "?":
        return 1
    if nargs in ("+", "*"):
        return -1
    return int(nargs)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with every secret replaced by ``<redacted>`` (module docstring, rules 1-4)."""
    out: list[str] = []
    hide = 0  # tokens still to hide: > 0 that many, -1 every one up to the next option
    header = False  # the previous token was a secret header's name ("Authorization:"): its value follows
    for token in argv:
        if (
            hide
            and not (hide < 0 and out[-1] == REDACTED and token.startswith("-"))
            and not token.startswith("--")
        ):
            out.append(REDACTED)
            hide = hide - 1 if hide > 0 else hide
            continue
        hide = 0
        if header:
            header = False
            if re.fullmatch(_SCHEME.removesuffix("?"), token + " ", re.IGNORECASE):
                out.append(token)
                hide = 1  # a scheme word: the credential is the next token
            else:
                out.append(REDACTED)
            continue
        if token.startswith("-") and len(token) > 1 and token != "--":
            name, eq, _value = token.partition("=")
            count = secret_values(name)
            if count is not None:
                out.append(f"{name}={REDACTED}" if eq else token)
                hide = 0 if eq else count
                continue
        assignment = _ENV_ASSIGNMENT.fullmatch(token)
        if assignment and secret_name(assignment.group(1)):
            out.append(f"{assignment.group(1)}={REDACTED}")
            continue
        header = bool(_HEADER_NAME.fullmatch(token)) and secret_name(token[:-1])
        out.append(redact_text(token))
    return out


def redact_text(text: str) -> str:
    """Secrets out of free text (a token, an output line, an error message): rules 1, 2 and 4."""
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _OPTION_VALUE.sub(_option_value, text)
    text = _NAMED_VALUE.sub(_named_value, text)
    return _SHAPES.sub(REDACTED, text)


def _option_value(match: re.Match[str]) -> str:
    count = secret_values(match.group("name"))
    if (
        not count
        or match.group("value").startswith(REDACTED)
        or (
            match.group("sep") != "=" and match.group("value").startswith("-")  # the next option, not a value
        )
    ):
        return _inside(match, "value", "more")
    more = match.group("more")
    if count < 0 and match.group("sep") != "=":  # it takes every word up to the next option
        more = re.sub(r"\S+", REDACTED, more)
    else:
        more = redact_text(more)
    return f"{match.group('name')}{match.group('sep')}{REDACTED}{more}"


def _named_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if not secret_name(match.group("name")) or value.startswith(REDACTED) or value in _PLACEHOLDERS:
        return _inside(match, "value")
    return f"{match.group('name')}{match.group('sep')}{match.group('scheme')}{REDACTED}"


def _inside(match: re.Match[str], first: str, last: str | None = None) -> str:
    """A match that hides nothing itself, with its values (groups ``first`` to ``last``) redacted as a
    text of their own: a quoted value may hold a whole command line (``--launcher-args '--api-key S'``),
    an unquoted one a header (``--header=Authorization: token S``)."""
    begin, end = match.start(first), match.end(last or first)
    start = match.start()
    text = match.group()
    return text[: begin - start] + redact_text(text[begin - start : end - start]) + text[end - start :]
