"""Reading an input file (profile, evidence, capture) without trusting it.

Every file topo-gate reads goes through ``RegularFile``: the open never blocks (a FIFO fails at once
instead of hanging), only regular files are read (``/dev/zero`` is refused, not read until memory
runs out), and no more than a cap is read. JSON inputs then pass ``parse_json``, which keeps what
the tools after it cannot use -- nesting deeper than a cap, integers beyond 64 bits, infinities --
from ever reaching them. Standard library only: the launcher reader uses this module.
"""

from __future__ import annotations

import os
import stat
from typing import Any

#: Nesting of JSON/YAML input. Real files nest six or seven levels deep; hostile ``[[[[...`` does not
#: get to recurse through the tools.
MAX_DEPTH = 32
#: Integers in any input: sizes, counts and indices all fit in 64 bits; ``10**400`` is no size.
MAX_INT = 2**63 - 1


class InputError(Exception):
    """An input that cannot be used. ``str(error)`` is one line: ``<field>: <problem>``, or the
    problem alone when it concerns the whole file (``field == ""``)."""

    def __init__(self, problem: str, field: str = "") -> None:
        self.problem = " ".join(problem.split())
        self.field = field
        super().__init__(f"{field}: {self.problem}" if field else self.problem)


class RegularFile:
    """An input file opened without blocking and identified by ``fstat`` of the open handle.

    ``identity`` lets a cache tell an unchanged file from a replaced one without a race between
    checking and reading. ``what`` names the expected content in messages ("a profile file").
    """

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise InputError("no such file") from None
        except OSError as error:
            raise InputError(f"cannot open: {error.strerror or error}") from None
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            kind = "a directory" if stat.S_ISDIR(status.st_mode) else "not a regular file"
            raise InputError(f"is {kind}, not {what}")
        self.what = what
        self._handle = os.fdopen(fd, "rb")
        self.identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)

    def read_text(self, limit: int) -> str:
        """The text, refusing more than ``limit`` bytes (reading no further) and non-UTF-8 bytes."""
        try:
            payload = self._handle.read(limit + 1)
        except OSError as error:
            raise InputError(f"cannot read: {error.strerror or error}") from None
        if len(payload) > limit:
            raise InputError(f"larger than {_size_words(limit)}; not {self.what}")
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"not UTF-8 text (byte {error.start}: {error.reason})") from None

    def read_head(self, size: int) -> bytes:
        """At most the first ``size`` bytes, undecoded."""
        try:
            return self._handle.read(size)
        except OSError as error:
            raise InputError(f"cannot read: {error.strerror or error}") from None

    def __enter__(self) -> RegularFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._handle.close()


def read_text(path: str | os.PathLike[str], *, limit: int, what: str) -> str:
    """The whole text of regular file ``path``, at most ``limit`` bytes; ``InputError`` otherwise."""
    with RegularFile(path, what) as source:
        return source.read_text(limit)


def parse_json(text: str) -> Any:
    """JSON text -> plain data whose every value the tools can use, else ``InputError`` naming where.

    Refused: NaN/Infinity literals, nesting deeper than ``MAX_DEPTH``, integers beyond 64 bits
    (including ones Python will not even convert: thousands of digits), and numbers that overflow a
    float (``1e400``).
    """
    import json  # here: the profile reader never parses JSON

    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise InputError(f"not JSON this tool reads: nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as error:
        raise InputError(f"not JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None
    except ValueError as error:  # NaN/Infinity, or an integer with more digits than Python converts
        raise InputError(long_integer_words(text) or f"not JSON: {error}") from None
    check_plain_values(data)
    return data


def check_plain_values(data: Any) -> None:
    """Depth, integer range and finiteness of every value, iteratively (no recursion to exhaust)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"nested deeper than {MAX_DEPTH} levels", where)
        if isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        if isinstance(value, int):
            if not -MAX_INT <= value <= MAX_INT:
                raise InputError(
                    f"integer out of range ({value.bit_length()} bits; sizes and counts fit in 63)", where
                )
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise InputError("number out of range (not finite)", where)
        elif isinstance(value, dict):
            stack.extend(
                (item, f"{where}.{key}" if where else str(key), depth + 1) for key, item in value.items()
            )
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value))


def long_integer_words(text: str) -> str | None:
    """Where an integer too long to convert sits (``json`` says only that one exists)."""
    import re

    found = re.search(r"[0-9]{4300,}", text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
    digits = found.end() - found.start()
    return f"line {line}, column {column}: an integer of {digits} digits (sizes and counts fit in 19)"


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _size_words(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
