"""Knob distributions (uniform, loguniform, int, choice, grid, fixed) and the checks of one against its knob."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from studies.knobs import Knob
from studies.spec.integers import Integer
from studies.spec.names import Scalar


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# (field, error type, message, offending value): one problem of a section's cross-field check.
FieldProblem = tuple[str, str, str, Any]


def raise_field_problems(model: str, problems: list[FieldProblem]) -> None:
    """Every problem at its own field, all at once: the field paths survive when the section sits inside a
    StudySpec (prefixed with the section's own)."""
    errors = [
        InitErrorDetails(type=PydanticCustomError(kind, message), loc=(field,), input=value)
        for field, kind, message, value in problems
    ]
    if errors:
        raise ValidationError.from_exception_data(model, errors)


class Uniform(_Strict):
    """A float drawn uniformly from [low, high]."""

    type: Literal["uniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        return self


class LogUniform(_Strict):
    """A float drawn uniformly in log space from [low, high]; low must be positive."""

    type: Literal["loguniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered_positive(self) -> LogUniform:
        if self.low <= 0:
            raise ValueError(f"loguniform needs low > 0, got {self.low:g}")
        if not self.low < self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        return self


class IntRange(_Strict):
    """An integer drawn from low..high inclusive (every `step`, or log-uniformly when `log`)."""

    type: Literal["int"]
    low: Integer
    high: Integer
    step: Integer = Field(1, ge=1)
    log: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and (self.low < 1 or self.step != 1):
            raise ValueError("an int distribution with log: true needs low >= 1 and step 1")
        return self


class _Values(_Strict):
    values: list[Scalar] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _unique(cls, values: list[Scalar]) -> list[Scalar]:
        return _check_unique(values)


class Choice(_Values):
    """One of `values`, picked by the tuner (kind: compare)."""

    type: Literal["choice"]


class Grid(_Values):
    """Every one of `values`, each run on every seed (kind: grid)."""

    type: Literal["grid"]


class Fixed(_Strict):
    """A constant; `knob: 0.5` in a spec is shorthand for `knob: {type: fixed, value: 0.5}`."""

    type: Literal["fixed"]
    value: Scalar


def _check_unique(values: list[Scalar]) -> list[Scalar]:
    seen = [(type(v).__name__, v) for v in values]
    if len(set(seen)) != len(seen):
        raise ValueError(f"values must be unique, got {values}")
    return values


Distribution = Annotated[Uniform | LogUniform | IntRange | Choice | Grid | Fixed, Field(discriminator="type")]


def _points(dist: Distribution) -> list[Scalar]:
    """The discrete values of a grid or fixed distribution."""
    if isinstance(dist, Grid):
        return list(dist.values)
    if isinstance(dist, Fixed):
        return [dist.value]
    raise TypeError(f"{dist.type} has no discrete points")


def _check_distribution(knob: Knob, dist: Distribution) -> str | None:
    """Why `dist` cannot drive `knob`, or None when it can."""
    if knob.kind == "categorical":
        if isinstance(dist, (Uniform, LogUniform, IntRange)):
            return f"knob '{knob.name}' is categorical ({knob.describe_range()}): use choice, grid or fixed"
        bad = [v for v in _discrete_values(dist) if v not in knob.categories]
        if bad:
            return f"knob '{knob.name}' must be {knob.describe_range()}, got {bad}"
        return None
    if knob.kind == "int" and isinstance(dist, (Uniform, LogUniform)):
        return f"knob '{knob.name}' takes integers: use type int, choice, grid or fixed, not {dist.type}"
    if isinstance(dist, (Uniform, LogUniform, IntRange)):
        values: list[Any] = [dist.low, dist.high]
    else:
        values = [v for v in _discrete_values(dist) if not (knob.nullable and v is None)]
    for value in values:
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not numeric or (knob.kind == "int" and not isinstance(value, int)):
            kind = "an integer" if knob.kind == "int" else "a number"
            return f"knob '{knob.name}' takes {kind}, got {value!r}"
        if not knob.contains(float(value)):
            return f"knob '{knob.name}' must lie in {knob.describe_range()}, got {value:g}"
    return None


def _discrete_values(dist: Choice | Grid | Fixed) -> list[Scalar]:
    return [dist.value] if isinstance(dist, Fixed) else list(dist.values)


# Knobs that only make sense on images, with the value that switches each off.
_IMAGE_ONLY_KNOBS: dict[str, Scalar] = {"augment": "none", "mixup": 0.0, "cutmix": 0.0}


def _can_enable(dist: Distribution) -> bool:
    """Whether some value of `dist` switches an image-only knob on (anything but none / 0 / false)."""
    if isinstance(dist, (Uniform, LogUniform, IntRange)):
        return dist.high > 0
    return any(value not in ("none", 0, 0.0, False) for value in _discrete_values(dist))


def has_searchable_knobs(space: Mapping[str, Distribution]) -> bool:
    """Whether a tuner has anything to search: some knob is not fixed. The driver skips tuning otherwise."""
    return any(not isinstance(dist, Fixed) for dist in space.values())


def _scalar_shorthand(space: Any) -> Any:
    """Turn `knob: 0.5` into a fixed distribution; leave everything else to the validators."""
    if not isinstance(space, Mapping):
        return space
    return {k: v if isinstance(v, Mapping) else {"type": "fixed", "value": v} for k, v in space.items()}
