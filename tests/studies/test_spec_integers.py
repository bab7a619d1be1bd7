"""Integer fields read numbers as JSON Schema does: `3.0` is the integer 3 (a number with no fractional
part), while 3.5, `true` and "3" stay refused at their field, under the strict validation the API uses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from studies.spec import StudySpec
from studies.spec.integers import integral_to_int
from studies.spec.loading import validate_spec_data
from tests.factories import quick_spec

SCHEMA = StudySpec.model_json_schema()
Changes = Callable[[Any], dict[str, Any]]  # the spec's top-level fields that put a value at the field


def _t_freeze(**dist: Any) -> dict[str, Any]:
    return {"method_search": {"autonorm_s": {"t_freeze": {"type": "int", "low": 1, "high": 3, **dist}}}}


def _width(**dist: Any) -> dict[str, Any]:
    lr = {"type": "loguniform", "low": 1e-4, "high": 1e-2}
    return {"search": {"lr": lr, "width_expansion": {"type": "int", "low": 2, "high": 4, **dist}}}


def _user_dataset(task: str, **declared: Any) -> dict[str, Any]:
    return {"user_datasets": [{"name": "mine", "path": "/data/mine.npz", "task": task, **declared}]}


def _sequential(**design: Any) -> dict[str, Any]:
    return {"seeds": None, "sequential": {"first_seeds": 3, "max_seeds": 5, "effect": 0.02, **design}}


# Every integer field of the schema (by its path there): the spec changes that put a value at it, a whole
# value it takes, where the validated spec holds it, and where a refusal of another value is reported.
_T_FREEZE = ("method_search", "autonorm_s", "t_freeze")
_WIDTH = ("search", "width_expansion")
INTEGER_FIELDS: dict[str, tuple[Changes, int, tuple[str | int, ...], tuple[str | int, ...]]] = {
    "budget.epochs": (lambda v: {"budget": {"epochs": v}}, 4, ("budget", "epochs"), ("budget", "epochs")),
    "budget.batch_size": (
        lambda v: {"budget": {"epochs": 4, "batch_size": v}},
        32,
        ("budget", "batch_size"),
        ("budget", "batch_size"),
    ),
    "budget.warmup_epochs": (
        lambda v: {"budget": {"epochs": 4, "warmup_epochs": v}},
        1,
        ("budget", "warmup_epochs"),
        ("budget", "warmup_epochs"),
    ),
    "data.severities.[]": (
        lambda v: {"dataset": "digits_c", "data": {"severities": [v]}},
        3,
        ("data", "severities", 0),
        ("data", "severities", 0),
    ),
    "max_failures": (lambda v: {"max_failures": v}, 2, ("max_failures",), ("max_failures",)),
    "method_search.{}.{}.low": (
        lambda v: _t_freeze(low=v),
        1,
        (*_T_FREEZE, "low"),
        (*_T_FREEZE, "int", "low"),
    ),
    "method_search.{}.{}.high": (
        lambda v: _t_freeze(high=v),
        3,
        (*_T_FREEZE, "high"),
        (*_T_FREEZE, "int", "high"),
    ),
    "method_search.{}.{}.step": (
        lambda v: _t_freeze(step=v),
        2,
        (*_T_FREEZE, "step"),
        (*_T_FREEZE, "int", "step"),
    ),
    "num_samples": (lambda v: {"num_samples": v}, 2, ("num_samples",), ("num_samples", "int")),
    "num_samples.{}": (
        lambda v: {"num_samples": {"autonorm_s": v, "frozen_ln": 1, "dyt": 1}},
        2,
        ("num_samples", "autonorm_s"),
        ("num_samples", "dict[str,int]", "autonorm_s"),
    ),
    "resources.seeds_per_trial": (
        lambda v: {"resources": {"seeds_per_trial": v}},
        2,
        ("resources", "seeds_per_trial"),
        ("resources", "seeds_per_trial"),
    ),
    "scheduler.grace_period": (
        lambda v: {"scheduler": {"type": "asha", "grace_period": v}},
        2,
        ("scheduler", "grace_period"),
        ("scheduler", "grace_period"),
    ),
    "scheduler.max_t": (
        lambda v: {"scheduler": {"type": "asha", "max_t": v}},
        4,
        ("scheduler", "max_t"),
        ("scheduler", "max_t"),
    ),
    "search.{}.low": (lambda v: _width(low=v), 2, (*_WIDTH, "low"), (*_WIDTH, "int", "low")),
    "search.{}.high": (lambda v: _width(high=v), 4, (*_WIDTH, "high"), (*_WIDTH, "int", "high")),
    "search.{}.step": (lambda v: _width(step=v), 2, (*_WIDTH, "step"), (*_WIDTH, "int", "step")),
    "seeds.[]": (lambda v: {"seeds": [0, v]}, 1, ("seeds", 1), ("seeds", 1)),
    "sequential.first_seeds": (
        lambda v: _sequential(first_seeds=v),
        3,
        ("sequential", "first_seeds"),
        ("sequential", "first_seeds"),
    ),
    "sequential.seeds_per_look": (
        lambda v: _sequential(seeds_per_look=v),
        2,
        ("sequential", "seeds_per_look"),
        ("sequential", "seeds_per_look"),
    ),
    "sequential.max_seeds": (
        lambda v: _sequential(max_seeds=v),
        5,
        ("sequential", "max_seeds"),
        ("sequential", "max_seeds"),
    ),
    "split_seed": (lambda v: {"split_seed": v}, 5, ("split_seed",), ("split_seed",)),
    "tune_seeds.[]": (lambda v: {"tune_seeds": [v]}, 7, ("tune_seeds", 0), ("tune_seeds", 0)),
    "user_datasets.[].max_len": (
        lambda v: _user_dataset("token_classification", max_len=v),
        64,
        ("user_datasets", 0, "max_len"),
        ("user_datasets", 0, "max_len"),
    ),
    "user_datasets.[].seed": (
        lambda v: _user_dataset("image_classification", seed=v),
        3,
        ("user_datasets", 0, "seed"),
        ("user_datasets", 0, "seed"),
    ),
}


def _integer_paths(schema: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[str]:
    """The paths of the schema's `integer` fields ([] an item, {} a mapping's value); a union that also
    takes any number (a fixed knob value) has no integer field of its own."""
    if "$ref" in schema:
        schema = SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if schema.get("type") == "integer":
        yield ".".join(path)
    branches = schema.get("anyOf", []) + schema.get("oneOf", [])
    if not any(branch.get("type") == "number" for branch in branches):
        for branch in branches:
            yield from _integer_paths(branch, path)
    for name, field in schema.get("properties", {}).items():
        yield from _integer_paths(field, (*path, name))
    if isinstance(schema.get("items"), dict):
        yield from _integer_paths(schema["items"], (*path, "[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _integer_paths(schema["additionalProperties"], (*path, "{}"))


def _spec(changes: Changes, value: Any) -> dict[str, Any]:
    spec = quick_spec(**changes(value))
    return {field: item for field, item in spec.items() if item is not None}  # None: left out


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def test_every_integer_field_of_the_schema_is_specified_here():
    assert set(_integer_paths(SCHEMA)) == set(INTEGER_FIELDS)


@pytest.mark.parametrize("field", INTEGER_FIELDS)
def test_an_integral_float_is_taken_as_the_integer(field):
    changes, whole, at, _ = INTEGER_FIELDS[field]
    assert _at(validate_spec_data(_spec(changes, whole)).model_dump(), at) == whole  # the case is valid

    stored = _at(validate_spec_data(_spec(changes, float(whole))).model_dump(), at)

    assert stored == whole and type(stored) is int


@pytest.mark.parametrize("field", INTEGER_FIELDS)
@pytest.mark.parametrize("sent", ["fraction", "true", "text"])
def test_a_fraction_a_boolean_or_a_numeric_string_is_refused_at_the_field(field, sent):
    changes, whole, _, loc = INTEGER_FIELDS[field]
    value = {"fraction": whole + 0.5, "true": True, "text": str(whole)}[sent]

    with pytest.raises(ValidationError) as refused:
        validate_spec_data(_spec(changes, value))

    assert loc in [error["loc"] for error in refused.value.errors()]


def test_the_schema_still_says_integer_with_its_bounds():
    budget = SCHEMA["$defs"]["Budget"]["properties"]
    assert budget["epochs"] == {"default": 10, "minimum": 1, "title": "Epochs", "type": "integer"}
    severity = SCHEMA["$defs"]["DataOptions"]["properties"]["severities"]["anyOf"][0]["items"]
    assert severity == {"maximum": 5, "minimum": 1, "type": "integer"}
    max_t = SCHEMA["$defs"]["SchedulerSpec"]["properties"]["max_t"]["anyOf"][0]
    assert max_t == {"minimum": 1, "type": "integer"}


@pytest.mark.parametrize(
    ("changes", "loc", "kind"),
    [
        ({"budget": {"epochs": 0.0}}, ("budget", "epochs"), "greater_than_equal"),
        (
            {"dataset": "digits_c", "data": {"severities": [6.0]}},
            ("data", "severities", 0),
            "less_than_equal",
        ),
        ({"scheduler": {"type": "asha", "max_t": 0.0}}, ("scheduler", "max_t"), "greater_than_equal"),
    ],
)
def test_the_bounds_hold_for_the_integer_an_integral_float_names(changes, loc, kind):
    with pytest.raises(ValidationError) as refused:
        validate_spec_data(quick_spec(**changes))
    assert (loc, kind) in [(error["loc"], error["type"]) for error in refused.value.errors()]


@pytest.mark.parametrize(
    ("value", "converted"),
    [(3.0, 3), (-2.0, -2), (3.5, 3.5), (True, True), ("3", "3"), (float("nan"), None), (float("inf"), None)],
)
def test_integral_to_int_changes_only_a_float_with_no_fractional_part(value, converted):
    result = integral_to_int(value)
    if converted is None:  # NaN and infinities pass through untouched, to be refused as floats
        assert result is value
    else:
        assert result == converted and type(result) is type(converted)
