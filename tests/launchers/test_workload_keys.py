"""A workload file's token counts as YAML and JSON spell them: every spelling YAML reads as one integer
is that integer, two spellings of one integer are refused naming both, and JSON's string keys are read
when they are canonical decimals (topo_gate/launchers/plan/workload.py, ``load_workload``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo_gate.launchers.plan.workload import MAX_TOKENS, WorkloadError, load_workload


def _load(tmp_path: Path, text: str) -> tuple[tuple[int, float], ...]:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return load_workload(path).steps


@pytest.mark.parametrize(
    ("steps", "first", "second"),
    [
        ("{16: 1, 0x10: 100}", "16", "0x10"),
        ("{1: 1, +1: 50}", "1", "+1"),
        ("{10: 1, 1_0: 50}", "10", "1_0"),
        ("{0b1: 1, 1: 50}", "0b1", "1"),
        ("{1: 1, '1': 50}", "1", "'1'"),
        ('{"8": 1, 8: 50}', "'8'", "8"),
    ],
)
def test_two_spellings_of_one_token_count_are_refused_naming_both(
    tmp_path: Path, steps: str, first: str, second: str
) -> None:
    with pytest.raises(WorkloadError) as caught:
        _load(tmp_path, f"steps: {steps}\n")
    assert f"is written twice ({first} and {second})" in str(caught.value)


@pytest.mark.parametrize(
    ("steps", "key"), [("{1: 1, 1.0: 5}", "1.0"), ("{1: 1, true: 5}", "True"), ("{2.5: 1}", "2.5")]
)
def test_a_key_that_is_no_integer_is_refused_by_name_not_taken_for_an_equal_one(
    tmp_path: Path, steps: str, key: str
) -> None:
    with pytest.raises(WorkloadError, match=f"token count {key} is not an integer in 1.."):
        _load(tmp_path, f"steps: {steps}\n")


def test_the_same_spelling_twice_is_still_refused_by_the_loader(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="duplicate key '1'"):
        _load(tmp_path, "steps: {1: 1, 1: 5}\n")


@pytest.mark.parametrize(
    ("steps", "read"), [("{0x10: 1, 1: 3}", ((1, 0.75), (16, 0.25))), ("{1_0: 2}", ((10, 1.0),))]
)
def test_one_spelling_of_each_count_is_that_integer(
    tmp_path: Path, steps: str, read: tuple[tuple[int, float], ...]
) -> None:
    assert _load(tmp_path, f"steps: {steps}\n") == read


def test_a_json_workload_is_read_with_its_string_keys(tmp_path: Path) -> None:
    assert _load(tmp_path, '{"name": "j", "steps": {"1": 10, "8": 30}}') == ((1, 0.25), (8, 0.75))


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("1", True),
        (str(MAX_TOKENS), True),
        (str(MAX_TOKENS + 1), False),
        ("0", False),
        ("01", False),
        ("+1", False),
        ("1_0", False),
        (" 1", False),
        ("1.0", False),
        ("0x10", False),
        ("١", False),  # an Arabic-Indic digit one: str.isdigit() and int() take it
        ("eight", False),
    ],
)
def test_a_string_key_is_read_only_as_a_canonical_decimal_in_range(
    tmp_path: Path, key: str, allowed: bool
) -> None:
    text = f'{{"steps": {{"{key}": 1}}}}'
    if allowed:
        assert _load(tmp_path, text) == ((int(key), 1.0),)
        return
    with pytest.raises(WorkloadError) as caught:
        _load(tmp_path, text)
    assert repr(key) in str(caught.value)
    assert "not an integer in 1.." in str(caught.value)


@pytest.mark.parametrize("order", ["steps first", "description first"])
def test_only_the_steps_mapping_gives_token_counts(tmp_path: Path, order: str) -> None:
    # A description is free text, but YAML lets it be a mapping: its keys are no steps, wherever it is.
    steps, description = "steps: {1: 1, 8: 3}", "description: {2: 5, 16: 7}"
    text = "\n".join([steps, description] if order == "steps first" else [description, steps])
    assert _load(tmp_path, text + "\n") == ((1, 0.25), (8, 0.75))
