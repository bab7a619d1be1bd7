"""Query values that select data from a fixed set of names: an unknown one is a 422 at its parameter naming
the choices (as a filter it would otherwise select nothing, and a typo would read as "no studies"), and the
OpenAPI document lists the choices, so clients and schema-driven tests send known ones."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from studies.spec import KNOWN_DATASETS, METHODS

__all__ = ["KnownDataset", "KnownMethod"]


def _one_of(kind: str, known: tuple[str, ...], name: str) -> str:
    """`name` when it is one of `known`, else a 422 naming them."""
    if name not in known:
        raise PydanticCustomError(
            f"unknown_{kind}",
            f"unknown {kind} '{{{kind}}}'; choose one of {{known}}",
            {kind: name, "known": ", ".join(known)},
        )
    return name


KnownDataset = Annotated[
    str,
    AfterValidator(partial(_one_of, "dataset", KNOWN_DATASETS)),
    WithJsonSchema({"type": "string", "enum": list(KNOWN_DATASETS)}),
]
KnownMethod = Annotated[
    str,
    AfterValidator(partial(_one_of, "method", METHODS)),
    WithJsonSchema({"type": "string", "enum": list(METHODS)}),
]
