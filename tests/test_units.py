"""The one byte-size formatter: a decision's reasons and the reports at four significant digits, a
launcher's limits at six (so one token under a round size does not read as the round size)."""

from __future__ import annotations

import pytest

from topo_gate._units import human_bytes

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
