"""Secrets out of a command line, or any text, before it is written into a record that may be shared
or printed on a terminal. Pure; the launchers' option tables are its only data.

The rule (docs/ab.md "Redaction"):

1. An option that names a secret, read as the launcher's parser reads it: its name (split at
   ``-``, ``_``, ``.`` and camelCase humps: ``--authToken``) has a word among ``SECRET_WORDS``
   (``--api-key``, ``--hf_token``, ``--password``; not ``--max-tokens`` or ``--tokenizer``), or it is
   an abbreviation argparse takes for such an option of a launcher's parser (``--api-ke``,
   ``--hf-tok``: the same option tables ``exec`` reads CMD with, ``launchers.command.options.table``). Its
   values, given as ``--opt=VALUE`` or as the tokens it takes (all of ``--api-key A B`` where the
   parser takes several), become ``<redacted>``.
2. ``NAME=VALUE`` and ``NAME: VALUE`` where NAME is such a name (``HF_TOKEN=...``, a JSON key
   ``"hfToken": "..."``, a header ``Authorization: token ...``, ``X-Api-Key: ...``,
   ``--header=Authorization:...``): VALUE (after an authorization scheme word, which is kept) becomes
   ``<redacted>``.
3. One argument holding several (``bash -c "vllm serve --api-key S"``, a wrapper's ``--args '--hf-token
   S'``): rules 1 and 2 apply inside it as in free text.
4. Anywhere in any token or text: URL userinfo whatever it holds (``https://u:p/@ss@host`` ->
   ``https://<redacted>@host``; ``https:/u:p@host`` too, as ``pathlib`` writes a URL given as a
   path), secret-named query values (``?token=...``), ``Bearer``/``Basic`` credentials, and tokens of
   well-known shapes (Hugging Face ``hf_...``, OpenAI ``sk-...``, GitHub ``ghp_...``, AWS
   ``AKIA...``, Slack ``xox.-...``).

``redact_text`` applies 1, 2 and 4 to free text: an output tail, a reason, an error line.
Over-redaction is the safe side: a value that only looks like a secret is hidden too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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
# camelCase words ("authToken", "hfToken", "apiKey"): a lower-case letter or digit before an upper-case
# one, or an upper-case run before a capitalised word ("HFToken" -> "HF Token").
_CAMEL_WORDS = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ENV_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
# A URL's scheme and the slashes after it; "https:/" too, as a path library normalises "https://".
# Its userinfo is everything up to the last "@" of the run of non-blank characters (``_urls``): a
# password may hold "/", "@" or ":" (typed unencoded), so no character class can end it earlier.
_SCHEME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_BLANK_FREE = re.compile(r"\S+")
# A query parameter's name and "=" ("?token=", "&X-Amz-Signature="): secret when the name holds a word
# of _QUERY_WORDS; its value runs to the next "&", "#" or blank.
_QUERY_NAME = re.compile(r"[?&](?P<name>[A-Za-z0-9_-]*)=")
_QUERY_WORDS = re.compile(r"token|key|secret|password|signature|sig", re.IGNORECASE)
_QUERY_VALUE = re.compile(r"[^&#\s]+")
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_SHAPES = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}|\bAKIA[0-9A-Z]{16}\b|\bxox[abprs]-[A-Za-z0-9-]{10,}"
)
# A value: quoted, or every non-blank character (a secret may hold any of ",;&}/@:").
_VALUE = r"""(?:"[^"]*"?|'[^']*'?|[^\s"']\S*)"""
_VALUE_AT = re.compile(_VALUE)
# A value and the words after it that are no option: what an option taking every word up to the next
# option holds.
_VALUES_AT = re.compile(rf"""{_VALUE}(?P<more>(?:\s+(?![-\s]){_VALUE})*)""")
# The words of an Authorization header's value that name its scheme, kept: the credential follows.
_SCHEME = r"(?:(?:Bearer|Basic|Token|Digest|Bot|ApiKey|Key|Negotiate|AWS4-HMAC-SHA256)\s+)?"
#: What a usage line writes for a value ("expected KEY=VALUE"): no secret to hide.
_PLACEHOLDERS = ("VALUE...", "VALUE", "...", "V")
_HEADER_NAME = re.compile(r"[A-Za-z0-9_-]+:")
# NAME= / NAME: anywhere in a text (a header, a JSON or YAML key, an assignment), the value following;
# not a file's name in a path ("/etc/app/api-key.yaml: line 3" is where an error is, not a secret).
_NAMED = re.compile(
    rf"""(?<![\w./-])(?P<name>[A-Za-z_][\w.-]*)["']?\s*(?:=|:)\s*(?P<scheme>{_SCHEME})""", re.IGNORECASE
)
# An option and the separator before its value inside a text: "--api-key S", "--hf-tok=S".
_OPTION = re.compile(r"""(?<![\w-])(?P<name>--?[A-Za-z][\w.-]*)(?P<sep>=|\s+)(?=\S)(?!--)""")


def secret_name(name: str) -> bool:
    """Whether an option, variable or header name (``--api-key``, ``HF_TOKEN``, ``X-Api-Key``) names a
    secret by its words."""
    words = {word.lower() for word in _WORD_SPLIT.split(_CAMEL_WORDS.sub("_", name.lstrip("-"))) if word}
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
    from topo_gate.launchers.command.options import table

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
    """Secrets out of free text (a token, an output line, an error message): rules 1, 2 and 4.

    Every pass reads the text once from left to right (linear in its length: a 120 KB blank-free
    word is read in milliseconds): a name that holds no secret is passed over and the scan goes on
    after it, inside its value, where the value may itself hold a command line or a header."""
    text = _BLANK_FREE.sub(lambda run: _urls(run.group()), text) if ":/" in text else text
    text = _scan(_QUERY_NAME, text, _query_value)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _scan(_OPTION, text, _option_value)
    text = _scan(_NAMED, text, _named_value)
    return _SHAPES.sub(REDACTED, text)


#: What a scan does at a name: None, hide nothing (the scan goes on after the name); else the text
#: that replaces the match and its value, and where that value ends.
_Hidden = tuple[str, int] | None


def _scan(pattern: re.Pattern[str], text: str, hide: Callable[[re.Match[str], str], _Hidden]) -> str:
    out: list[str] = []
    copied = position = 0
    while (match := pattern.search(text, position)) is not None:
        hidden = hide(match, text)
        if hidden is None:
            position = match.end()
            continue
        out += [text[copied : match.start()], hidden[0]]
        copied = position = hidden[1]
    return "".join(out) + text[copied:]


def _urls(run: str) -> str:
    """A run of non-blank characters with a URL's userinfo (``scheme://USER:PASS@``) redacted: from the
    first scheme (the first letter of a run of scheme characters before ``:/``) to the run's last
    "@", read once whatever the run holds."""
    at = run.rfind("@")
    colon = run.find(":/")
    while 0 <= colon < at:
        begin = colon
        while begin > 0 and run[begin - 1] in _SCHEME_CHARACTERS:
            begin -= 1
        letter = next((i for i in range(begin, colon) if run[i].isascii() and run[i].isalpha()), None)
        slashes = colon + 1
        while slashes < len(run) and run[slashes] == "/":
            slashes += 1
        if letter is not None:
            return run[:slashes] + REDACTED + run[at:] if slashes <= at else run
        colon = run.find(":/", slashes)
    return run


def _query_value(match: re.Match[str], text: str) -> _Hidden:
    if not _QUERY_WORDS.search(match.group("name")):
        return None
    value = _QUERY_VALUE.match(text, match.end())
    return None if value is None else (match.group() + REDACTED, value.end())


def _option_value(match: re.Match[str], text: str) -> _Hidden:
    count = secret_values(match.group("name"))
    start = match.end()
    if not count or text.startswith(REDACTED, start):
        return None
    if match.group("sep") != "=" and text.startswith("-", start):  # the next option, not a value
        return None
    if count < 0 and match.group("sep") != "=":  # it takes every word up to the next option
        values = _VALUES_AT.match(text, start)
        assert values is not None, "the option pattern matched only where a value follows"
        more = re.sub(r"\S+", REDACTED, values.group("more"))
        return f"{match.group()}{REDACTED}{more}", values.end()
    value = _VALUE_AT.match(text, start)
    assert value is not None, "the option pattern matched only where a value follows"
    return f"{match.group()}{REDACTED}", value.end()


def _named_value(match: re.Match[str], text: str) -> _Hidden:
    start = match.end()
    if not secret_name(match.group("name")) or text.startswith(REDACTED, start) or _placeholder(text, start):
        return None
    value = _VALUE_AT.match(text, start)
    return None if value is None else (f"{match.group()}{REDACTED}", value.end())


def _placeholder(text: str, start: int) -> bool:
    """Whether the value at ``start`` is a usage line's placeholder (``KEY=VALUE``), read without
    reading the value (which may run to the end of a long word)."""
    for word in _PLACEHOLDERS:
        end = start + len(word)
        if text.startswith(word, start) and (end == len(text) or text[end].isspace()):
            return True
    return False
