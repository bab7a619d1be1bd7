"""What counts as a number in a metric, a knob or a report: a finite int or float, never a bool. One
definition for every layer (the driver's bookkeeping, the evidence views, the figures)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

__all__ = ["finite_or_none", "is_finite_number", "json_safe"]


def is_finite_number(value: Any) -> TypeGuard[float]:
    """True for a finite int or float (numpy scalars included); False for bools, None, NaN, inf, text.
    A guard: where it holds, type checkers treat `value` as a number."""
    if _is_numpy_scalar(value):
        value = value.item()
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def finite_or_none(value: Any) -> float | None:
    """A plain float for a finite number, else None."""
    number = value.item() if _is_numpy_scalar(value) else value
    return float(number) if is_finite_number(number) else None


def json_safe(value: Any) -> Any:
    """`value` as strict JSON can carry it: NaN and infinities become None, numpy scalars plain numbers,
    mapping keys text; mappings and sequences recursively."""
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy (or torch) scalars: float32 is not a float
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _is_numpy_scalar(value: Any) -> bool:
    return type(value).__module__ == "numpy" and callable(getattr(value, "item", None))
