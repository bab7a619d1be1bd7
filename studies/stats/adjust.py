"""Multiple-comparison adjustment of p-values across the rows of one results table."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["ADJUSTMENT_METHODS", "adjust"]

# holm: family-wise error rate (Holm-Bonferroni step-down, valid under any dependence);
# bh: false discovery rate (Benjamini-Hochberg step-up); none: raw p-values.
ADJUSTMENT_METHODS = ("holm", "bh", "none")


def adjust(p_values: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """Adjusted p-values in the input order.

    None (or NaN) entries stand for comparisons that could not be tested: they stay None and do not
    count towards the family size.
    """
    if method not in ADJUSTMENT_METHODS:
        raise ValueError(f"unknown adjustment method {method!r}; choose one of {ADJUSTMENT_METHODS}")
    kept = [(i, p) for i, p in enumerate(p_values) if p is not None and not math.isnan(float(p))]
    tested = [i for i, _ in kept]
    p = np.asarray([float(value) for _, value in kept], dtype=np.float64)
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError(f"p-values must lie in [0, 1], got {p_values}")

    adjusted: list[float | None] = [None] * len(p_values)
    if p.size == 0:
        return adjusted
    if method == "holm":
        values = _holm(p)
    elif method == "bh":
        values = _benjamini_hochberg(p)
    else:
        values = p
    for index, value in zip(tested, values, strict=True):
        adjusted[index] = float(value)
    return adjusted


def _holm(p: np.ndarray) -> np.ndarray:
    m = p.size
    order = np.argsort(p, kind="stable")
    # The k-th smallest p-value (0-based) is multiplied by the m - k hypotheses still in play, and the
    # running maximum keeps the step-down decisions monotone.
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.maximum.accumulate(stepped)
    return out


def _benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    # Step-up: each adjusted value is the smallest scaled value at or above its rank.
    out = np.empty(m)
    out[order] = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    return out
