"""Reading specs: JSON and YAML text, files, content types, and the shipped examples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from studies.limits import StudyLimits
from studies.spec import SpecFormatError, StudySpec, UnsupportedContentTypeError, load_spec, parse_spec_text

EXAMPLES = Path(__file__).resolve().parents[2] / "studies" / "examples"
YAML_TEXT = "name: y\ndataset: digits\nmethods: [dyt]\nsearch:\n  lr: 1e-3\n"


def test_yaml_and_json_texts_give_the_same_spec():
    from_yaml = load_spec(YAML_TEXT, "application/yaml")
    from_json = load_spec(json.dumps(from_yaml.model_dump(mode="json")), "application/json")
    assert from_yaml == from_json


def test_exponent_floats_without_a_dot_read_as_numbers_in_yaml():
    assert parse_spec_text(YAML_TEXT)["search"]["lr"] == pytest.approx(1e-3)


def test_duplicate_yaml_keys_are_an_error():
    with pytest.raises(SpecFormatError, match="duplicate key 'name'"):
        parse_spec_text("name: a\nname: b\n")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            '{"name": "a", "dataset": "digits", "name": "b"}',
            "key 'name' in the mapping that also holds 'dataset'",
        ),
        # Nested: json.loads would keep the last value (epochs 400) without a word.
        ('{"name": "a", "budget": {"epochs": 1, "batch_size": 8, "epochs": 400}}', "holds 'batch_size'"),
        ('{"name": "a", "search": {"lr": {"low": 1, "low": 2}}}', "duplicate key 'low' in a mapping"),
    ],
)
def test_duplicate_json_keys_are_an_error_as_in_yaml(text, fragment):
    with pytest.raises(SpecFormatError, match="not valid JSON: duplicate key") as raised:
        parse_spec_text(text, "application/json")
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    ("text", "content_type", "fragment"),
    [
        ("[1, 2]", "application/json", "mapping of fields"),
        ("{", "application/json", "not valid JSON"),
        ("a: [", None, "not valid YAML"),
        ("", "application/yaml", "got NoneType"),
    ],
)
def test_unreadable_texts_raise_spec_format_errors(text, content_type, fragment):
    with pytest.raises(SpecFormatError, match=fragment.replace("[", r"\[")):
        parse_spec_text(text, content_type)


def test_other_content_types_are_unsupported():
    with pytest.raises(UnsupportedContentTypeError, match="application/xml"):
        parse_spec_text("<a/>", "application/xml")


def test_files_are_read_by_path_with_the_format_from_the_suffix(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"name": "f", "dataset": "digits", "methods": ["dyt"]}))
    assert load_spec(path).name == "f"
    assert load_spec(str(path)).name == "f"


def test_load_spec_applies_limits_when_given():
    with pytest.raises(Exception, match="at most 1"):
        load_spec(YAML_TEXT, limits=StudyLimits(max_seeds=1))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_is_valid_within_default_limits_and_round_trips(path):
    spec = load_spec(path, limits=StudyLimits())
    assert StudySpec.model_validate(spec.model_dump(mode="json")) == spec
    assert spec.planned_trials() <= StudyLimits().max_trials


def test_the_quick_example_is_smoke_test_sized():
    spec = load_spec(EXAMPLES / "quick.yaml")
    assert spec.dataset == "digits" and spec.model.preset == "vit_lite_tiny"
    assert spec.methods == ["autonorm_s", "frozen_ln", "dyt"] and len(spec.seeds) == 3
    assert spec.budget.epochs <= 10 and spec.planned_trials() <= 20
    assert spec.resources.gpu == 0


def test_the_spec_module_imports_neither_torch_nor_fastapi():
    code = "import sys, studies.spec; print(sorted(m for m in ('torch', 'fastapi') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
