"""What counts as a number in a metric, a knob or a report: a finite int or float, never a bool. One
definition for every layer (the driver's bookkeeping, the evidence views, the figures)."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

__all__ = ["finite_or_none", "is_finite_number"]


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


def _is_numpy_scalar(value: Any) -> bool:
    return type(value).__module__ == "numpy" and callable(getattr(value, "item", None))
