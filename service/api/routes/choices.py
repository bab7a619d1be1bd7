"""Query values that select data from a fixed set of names: an unknown one is a 422 at its parameter naming
the choices (as a filter it would otherwise select nothing, and a typo would read as "no studies"), and the
OpenAPI document lists the choices, so clients and schema-driven tests send known ones."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from studies.spec import KNOWN_DATASETS, METHODS

__all__ = ["KnownDataset", "KnownMethod"]


def _known_dataset(name: str) -> str:
    if name not in KNOWN_DATASETS:
        raise PydanticCustomError(
            "unknown_dataset",
            "unknown dataset '{dataset}'; choose one of {known}",
            {"dataset": name, "known": ", ".join(KNOWN_DATASETS)},
        )
    return name


KnownDataset = Annotated[
    str, AfterValidator(_known_dataset), WithJsonSchema({"type": "string", "enum": list(KNOWN_DATASETS)})
]


def _known_method(name: str) -> str:
    if name not in METHODS:
        raise PydanticCustomError(
            "unknown_method",
            "unknown method '{method}'; choose one of {known}",
            {"method": name, "known": ", ".join(METHODS)},
        )
    return name


KnownMethod = Annotated[
    str, AfterValidator(_known_method), WithJsonSchema({"type": "string", "enum": list(METHODS)})
]
