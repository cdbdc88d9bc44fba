"""How numbers are written: the byte-size formatter (a decision's reasons and the reports at four
significant digits, a launcher's limits at six, so one token under a round size does not read as the
round size), and the one rounding rule for speed-ups, microseconds and percentages."""

from __future__ import annotations

import pytest

from topo_gate._units import (
    ci_text,
    human_bytes,
    percent_text,
    shown,
    speedup_ci_text,
    speedup_text,
    stored,
    stored_speedup_text,
    us_text,
)

MiB = 1 << 20


@pytest.mark.parametrize(
    ("nbytes", "words"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (14336, "14 KiB"), (1572864, "1.5 MiB"),
     (1835008, "1.75 MiB"), (3 << 30, "3 GiB"), (5 << 40, "5 TiB"), (2048 << 40, "2048 TiB")],
)  # fmt: skip
def test_four_significant_digits_in_the_largest_unit_reached(nbytes: int, words: str) -> None:
    assert human_bytes(nbytes) == words


@pytest.mark.parametrize(
    ("nbytes", "four", "six"),
    [
        (64 * MiB - 2048, "64 MiB", "63.998 MiB"),  # a 1024-wide bf16 row under 64 MiB
        (1433600, "1.367 MiB", "1.36719 MiB"),
        (1048575, "1024 KiB", "1024 KiB"),  # one byte under 1 MiB: still in KiB, rounded
        (100, "100 B", "100 B"),
    ],
)
def test_six_digits_tell_a_limit_from_the_round_size_beside_it(nbytes: int, four: str, six: str) -> None:
    assert (human_bytes(nbytes), human_bytes(nbytes, digits=6)) == (four, six)


# --- the one rounding rule ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (1.085, "1.09x"),  # 1.08499999... in binary: rounded from the stored decimal, it reads 1.09
        (1.0853, "1.09x"),
        (
            1.0849,
            "1.09x",
        ),  # kept as the profile keeps it (1.085), then rounded: as show and the reports read it
        (1.0844, "1.08x"),
        (2.0, "2.00x"),
        (0.995, "1.00x"),
    ],
)
def test_a_speedup_reads_its_stored_value_rounded_half_up(value: float, words: str) -> None:
    assert speedup_text(value) == words


def test_a_ci_and_a_speedup_round_alike() -> None:
    assert (ci_text((1.075, 1.105)), speedup_ci_text(1.085, (1.075, 1.105))) == (
        "1.08-1.11",
        "1.09x (CI 1.08-1.11)",
    )
    assert speedup_ci_text(1.085, None) == "1.09x"


def test_a_stored_speedup_keeps_three_decimals() -> None:
    assert (stored(1.23456), stored_speedup_text(1.23456), stored_speedup_text(2)) == (
        1.235,
        "1.235x",
        "2.000x",
    )


@pytest.mark.parametrize(
    ("value", "places", "signed", "words"),
    [
        (None, 2, False, "n/a"),
        (1.005, 2, False, "1.01"),  # the JSON's 1.005, half up: not the binary float's 1.00499...
        (208.08, 1, False, "208.1"),
        (4.0, 2, True, "+4.00"),
        (-0.5, 2, True, "-0.50"),
        (0.0, 2, True, "+0.00"),
        (12.3456, 0, False, "12"),
    ],
)
def test_microseconds_read_their_json_value_rounded_half_up(value, places, signed, words) -> None:
    assert us_text(value, places, signed=signed) == words


@pytest.mark.parametrize(
    ("share", "places", "signed", "words"),
    [
        (0.0123, 1, False, "1.2%"),
        (0.00125, 1, False, "0.1%"),  # 0.125% kept to six decimals, half up
        (0.05, 0, False, "5%"),
        (0.995, 0, False, "100%"),
        (-0.0096153, 1, True, "-1.0%"),
        (0.0123, 1, True, "+1.2%"),
        (0.95, 0, False, "95%"),
    ],
)
def test_a_share_reads_as_a_percentage_rounded_half_up(share, places, signed, words) -> None:
    assert percent_text(share, places, signed=signed) == words


def test_shown_rounds_the_kept_value_not_the_binary_one() -> None:
    assert (shown(2.675, 2), f"{2.675:.2f}") == ("2.68", "2.67")
    # What is kept decides: 1.23449999 kept to four decimals is 1.2345, which reads 1.235 to three.
    assert (shown(1.2344999, 3), shown(1.23449999, 3, keep=4)) == ("1.234", "1.235")


def test_a_share_is_kept_to_six_decimals_then_rounded_half_up() -> None:
    # 0.0123449 is kept as 0.012345 (1.2345%): half up at three places gives 1.235%, where keeping
    # five decimals (1.234%) or seven (1.23449% -> 1.234%) would not.
    assert percent_text(0.0123449, 3) == "1.235%"
    # And the percentage keeps the four decimals the share's six give it.
    assert percent_text(0.0123449, 4) == "1.2345%"
