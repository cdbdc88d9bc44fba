"""The guarded JSON reader at its edges: the integer range, the nesting depth, where a too-long integer
sits, and the byte cap, each at the limit and one past it.

Evidence, captures and fleet files all pass through ``topo_gate._inputs``; a limit that moves by one
either refuses a file the tool itself wrote (a size of 2**63 - 1 bytes is a valid ``max_bytes``) or
lets through a value the decisions cannot hold (a 64-bit integer, a float that overflowed).
"""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pytest

from topo_gate._inputs import InputError, RegularFile, parse_json, read_text

LARGEST = 2**63 - 1  # the largest count or size a profile field holds (int64)
DIGITS_PYTHON_CONVERTS = 4300  # sys.get_int_max_str_digits()'s default


def _refusal(text: str) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_json(text)
    return caught.value


@pytest.mark.parametrize("value", [LARGEST, -LARGEST, LARGEST - 1, 0])
def test_an_integer_within_63_bits_is_read_exactly(value: int) -> None:
    assert parse_json(f'{{"nbytes": {value}}}') == {"nbytes": value}


@pytest.mark.parametrize("value", [LARGEST + 1, -LARGEST - 1, 2**64])
def test_an_integer_past_63_bits_is_refused_with_its_field_and_size(value: int) -> None:
    error = _refusal(f'{{"runs": [{{"nbytes": {value}}}]}}')
    assert error.field == "runs[0].nbytes"
    assert error.problem == f"integer out of range ({value.bit_length()} bits; sizes and counts fit in 63)"


def test_an_integer_python_still_converts_is_refused_by_its_bits() -> None:
    value = int("9" * DIGITS_PYTHON_CONVERTS)
    error = _refusal(str(value))
    assert error.problem == f"integer out of range ({value.bit_length()} bits; sizes and counts fit in 63)"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("7" * (DIGITS_PYTHON_CONVERTS + 1), "line 1, column 1"),
        ('{"a": ' + "7" * (DIGITS_PYTHON_CONVERTS + 1) + "}", "line 1, column 7"),
        ('{\n "a":\n   ' + "7" * (DIGITS_PYTHON_CONVERTS + 1) + "}", "line 3, column 4"),
        ("[1,\n\n\n" + "7" * (DIGITS_PYTHON_CONVERTS + 1) + "]", "line 4, column 1"),
        ("\n" + "7" * (DIGITS_PYTHON_CONVERTS + 1), "line 2, column 1"),
    ],
    ids=["alone", "first line", "third line", "after blank lines", "after a newline that opens the file"],
)
def test_an_integer_too_long_to_convert_is_placed_by_line_and_column(text: str, where: str) -> None:
    """``json`` says only that such an integer exists; the message says where, counting from 1."""
    assert str(_refusal(text)) == (
        f"{where}: an integer of {DIGITS_PYTHON_CONVERTS + 1} digits (sizes and counts fit in 19)"
    )


@pytest.mark.parametrize("name", ["NaN", "Infinity", "-Infinity"])
def test_the_non_json_constants_are_refused(name: str) -> None:
    assert str(_refusal(f'{{"x": [{name}]}}')) == f"not JSON: {name} is not valid JSON"


@pytest.mark.parametrize("text", ["1e400", "-1e400"])
def test_a_float_that_overflows_is_refused_with_its_field(text: str) -> None:
    error = _refusal(f'{{"samples_us": [1.0, {text}]}}')
    assert (error.field, error.problem) == ("samples_us[1]", "number out of range (not finite)")


def test_the_largest_finite_float_is_read() -> None:
    assert parse_json("[1.7976931348623157e308]") == [1.7976931348623157e308]


def test_containers_32_levels_below_the_top_are_read() -> None:
    """The top value is level 0; a container at level 32 is read, a value inside it is not."""
    assert parse_json("[" * 33 + "]" * 33) is not None
    error = _refusal("[" * 33 + "1" + "]" * 33)
    assert error.problem == "nested deeper than 32 levels" and error.field == "[0]" * 33


def test_an_object_nested_past_the_limit_names_the_keys_down_to_it() -> None:
    text = '{"a": ' * 33 + "1" + "}" * 33
    error = _refusal(text)
    assert error.field == ".".join(["a"] * 33)


@pytest.mark.parametrize(
    ("limit", "words"),
    [
        (1024 * 1024, "1 MiB"),
        (1024 * 1024 - 1, "1048575 bytes"),
        (3 * 1024 * 1024 + 5, "3 MiB"),
        (2 * 1023 * 1024, "1 MiB"),  # just under 2 MiB: whole MiB, rounded down, never "2 MiB"
        (10, "10 bytes"),
    ],
)
def test_a_file_one_byte_over_its_cap_is_refused_and_one_at_it_is_read(
    tmp_path: Path, limit: int, words: str
) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(b"7" * limit)
    assert read_text(path, limit=limit, what="evidence") == "7" * limit
    path.write_bytes(b"7" * (limit + 1))
    with pytest.raises(InputError) as caught:
        read_text(path, limit=limit, what="evidence")
    assert str(caught.value) == f"larger than {words}; not evidence"


def test_a_byte_that_is_not_utf8_is_placed(tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError) as caught:
        read_text(path, limit=100, what="evidence")
    assert str(caught.value) == "not UTF-8 text (byte 7: invalid start byte)"


def _through_a_file(tmp_path: Path) -> Path:
    (tmp_path / "plain").write_text("{}")
    return tmp_path / "plain" / "input.json"  # ENOTDIR, for root too


def _symlink_loop(tmp_path: Path) -> Path:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return tmp_path / "loop"  # ELOOP, for root too


@pytest.mark.parametrize(
    ("make", "code"),
    [(_through_a_file, errno.ENOTDIR), (_symlink_loop, errno.ELOOP)],
    ids=["a path through a regular file", "a symlink to itself"],
)
def test_a_path_that_cannot_be_opened_is_one_line_with_the_reason(tmp_path: Path, make, code: int) -> None:
    """The user reads the system's reason alone ("cannot open: Not a directory"), not a traceback nor
    Python's "[Errno 20] ...: '/the/path'" (the caller puts the path in front once)."""
    path = make(tmp_path)
    with pytest.raises(InputError) as caught:
        read_text(path, limit=100, what="evidence")
    assert str(caught.value) == f"cannot open: {os.strerror(code)}"


class _BadSector(io.RawIOBase):
    """A regular file whose every read fails with EIO, as on a failing disk."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: object) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO))


def _read_head(path: Path) -> bytes:
    with RegularFile(path, "an evidence file or a profile") as source:
        return source.read_head(64)


@pytest.mark.parametrize(
    "read",
    [lambda path: read_text(path, limit=100, what="evidence"), _read_head],
    ids=["the whole text", "the head a reader sniffs"],
)
def test_a_file_whose_read_fails_is_one_line_with_the_reason(tmp_path: Path, monkeypatch, read) -> None:
    """A read error is "cannot read: Input/output error", not a traceback, whether the whole text is
    read or only the head that `report` and a profile set's index sniff for the format. No file a test
    can make fails to read once opened, so the open handle is swapped for one whose reads fail."""
    path = tmp_path / "input.json"
    path.write_text("{}")

    def failing_fdopen(fd: int, mode: str) -> io.BufferedReader:
        os.close(fd)
        return io.BufferedReader(_BadSector())

    monkeypatch.setattr(os, "fdopen", failing_fdopen)
    with pytest.raises(InputError) as caught:
        read(path)
    assert str(caught.value) == f"cannot read: {os.strerror(errno.EIO)}"
