"""The spec's JSON Schema states what its validators check where JSON Schema can: a request the OpenAPI
document calls valid is not refused for a repeated method or seed, or a blank name."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from studies.spec import StudySpec

SCHEMA = StudySpec.model_json_schema()


@pytest.mark.parametrize("field", ["methods", "seeds"])
def test_repeated_items_are_outside_the_schema_as_the_validator_refuses_them(field):
    assert SCHEMA["properties"][field]["uniqueItems"] is True
    data = {"name": "x", "dataset": "digits", "methods": ["dyt", "frozen_ln"], "seeds": [0, 1]}
    data[field] = [data[field][0]] * 2
    with pytest.raises(ValidationError, match="unique"):
        StudySpec.model_validate(data)


def test_a_blank_name_is_outside_the_schema_as_the_validator_refuses_it():
    pattern = SCHEMA["properties"]["name"]["pattern"]
    assert re.search(pattern, "  ") is None and re.search(pattern, "a b")
    with pytest.raises(ValidationError, match="name must not be blank"):
        StudySpec.model_validate({"name": "  ", "dataset": "digits", "methods": ["dyt"]})
