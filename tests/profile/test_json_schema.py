"""profiles/schema.json: current with the code, satisfied by every example, and not laxer than the
loader on the rules JSON Schema can express."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from topo_gate.profile import ProfileError
from topo_gate.profile.json_schema import profile_json_schema, schema_text
from topo_gate.profile.yaml_format import parse_yaml

REPO = Path(__file__).resolve().parents[2]
PUBLISHED = REPO / "profiles" / "schema.json"
MALFORMED = Path(__file__).resolve().parent / "malformed"
CASES = yaml.safe_load((MALFORMED / "cases.yaml").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(profile_json_schema())


def test_published_schema_is_current() -> None:
    assert PUBLISHED.read_text(encoding="utf-8") == schema_text(), (
        "regenerate: python -m topo_gate.profile.json_schema profiles/schema.json"
    )


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(PUBLISHED.read_text(encoding="utf-8")))


@pytest.mark.slow
@pytest.mark.parametrize(
    "example", sorted((REPO / "profiles" / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_example_validates(example: Path) -> None:
    VALIDATOR.validate(parse_yaml(example.read_text(encoding="utf-8")))


def _expressible_cases() -> list:
    """Malformed cases that parse as YAML and break a rule the JSON Schema states."""
    chosen = []
    for case in CASES:
        try:
            data = parse_yaml((MALFORMED / case["file"]).read_text(encoding="utf-8"))
        except (ProfileError, UnicodeDecodeError):
            continue
        if case.get("json_schema", True):
            chosen.append(pytest.param(data, id=case["file"]))
    return chosen


@pytest.mark.parametrize("document", _expressible_cases())
def test_json_schema_rejects_what_it_can_express(document: object) -> None:
    assert not VALIDATOR.is_valid(document)


def test_enough_cases_are_cross_checked() -> None:
    assert len(_expressible_cases()) >= 15
