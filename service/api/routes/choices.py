"""Query values that select data from a set of names: an unknown one is a 422 at its parameter naming the
choices (as a filter it would otherwise select nothing, and a typo would read as "no studies"), and the
OpenAPI document lists the built-in choices, so clients and schema-driven tests send known ones.

The set is the registry's: the built-ins, and the plugin methods and user datasets that stored studies
brought (their facts, read from the store only when a value is no built-in). The check runs in the route,
where the store can be read, not in the parameter's own validation.
"""

from __future__ import annotations

from typing import Annotated

from fastapi.exceptions import RequestValidationError
from pydantic import WithJsonSchema

from service.api.extensions import studies_visible
from service.api.load_shedding import DatabaseGate
from studies.methods import known_methods
from studies.spec import KNOWN_DATASETS, METHODS

__all__ = ["KnownDataset", "KnownMethod", "check_known_filters"]

KnownDataset = Annotated[str, WithJsonSchema({"type": "string", "enum": list(KNOWN_DATASETS)})]
KnownMethod = Annotated[str, WithJsonSchema({"type": "string", "enum": list(METHODS)})]


async def check_known_filters(database: DatabaseGate, *, dataset: str | None, method: str | None) -> None:
    """RequestValidationError (422) at each of `dataset` and `method` that neither the registry nor a stored
    study knows, naming the choices."""
    given = {"dataset": dataset, "method": method}
    if all(value is None or value in _known(kind) for kind, value in given.items()):
        return
    async with studies_visible(database, every_study=True):
        problems = [
            {
                "type": f"unknown_{kind}",
                "loc": ("query", kind),
                "msg": f"unknown {kind} '{value}'; choose one of {', '.join(_known(kind))}",
                "input": value,
            }
            for kind, value in given.items()
            if value is not None and value not in _known(kind)
        ]
    if problems:
        raise RequestValidationError(problems)


def _known(kind: str) -> tuple[str, ...]:
    return tuple(KNOWN_DATASETS) if kind == "dataset" else known_methods()
