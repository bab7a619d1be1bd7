"""Whole numbers as JSON Schema counts them: a number with no fractional part is an `integer`, so `3.0`
is one. The published schema says `integer` for these fields, and strict validation, which refuses any
float, would otherwise refuse a value that schema allows."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

__all__ = ["Integer", "PositiveInteger", "Severity", "integral_to_int"]


def integral_to_int(value: Any) -> Any:
    """`value` as an int when it is a float with no fractional part, else unchanged. Only that float
    changes: 3.5, true and "3" reach the strict int check as sent, and are refused there at their field."""
    if type(value) is float and value.is_integer():  # is_integer() is False for NaN and infinities
        return int(value)
    return value


# An int field that takes 3.0 as 3 under strict validation; its JSON schema stays `integer`.
Integer = Annotated[int, BeforeValidator(integral_to_int)]
# Bounds inside a union or a list go on the int before the conversion wraps it: put after it
# (`Annotated[Integer, Field(ge=1)]`), pydantic would publish its own `ge` keyword, not `minimum`.
PositiveInteger = Annotated[int, Field(ge=1), BeforeValidator(integral_to_int)]
Severity = Annotated[int, Field(ge=1, le=5), BeforeValidator(integral_to_int)]  # a corruption severity
