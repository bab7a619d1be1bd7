"""Text the store can keep: no NUL character (PostgreSQL refuses it in text and JSON, so a query with
one fails inside the driver) and valid Unicode (no lone surrogates, which UTF-8 cannot encode)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

__all__ = ["NamedText", "StorableText", "text_problem"]


def text_problem(text: str) -> str | None:
    """Why the store could not keep `text`, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000): NUL characters are not allowed"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate such as \\ud800)"
    return None


def _storable(text: str) -> str:
    problem = text_problem(text)
    if problem:
        raise PydanticCustomError("storable_text", "the text {problem}", {"problem": problem})
    return text


# For path and query parameters that reach a database query: a 422 at the parameter, never a 500.
# The documented pattern says the same to clients (lone surrogates cannot travel in a URL at all).
StorableText = Annotated[
    str, AfterValidator(_storable), WithJsonSchema({"type": "string", "pattern": "^[^\\u0000]*$"})
]
# For an optional query value that names something (`?claim=`): sent, it is not empty (an empty name
# selects nothing; leave the parameter out for the default), and the schema says so.
NamedText = Annotated[
    str,
    StringConstraints(min_length=1),
    AfterValidator(_storable),
    WithJsonSchema({"type": "string", "minLength": 1, "pattern": "^[^\\u0000]*$"}),
]
