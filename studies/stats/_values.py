"""Turning user input into clean float arrays; shared by every statistic."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# Relative tolerance under which a spread counts as zero: metric values such as 0.91 - 0.90 and
# 0.92 - 0.91 differ in the 17th digit, and a t statistic built on that noise would be meaningless.
ZERO_SPREAD_RTOL = 1e-12


def finite_values(values: Iterable[float | None]) -> tuple[np.ndarray, int]:
    """Returns (finite values as float64, count of dropped None / NaN / inf entries)."""
    raw = [v for v in values]
    kept = [float(v) for v in raw if v is not None and np.isfinite(float(v))]
    return np.asarray(kept, dtype=np.float64), len(raw) - len(kept)


def has_zero_spread(x: np.ndarray) -> bool:
    """True when all entries are equal up to floating-point noise (also for fewer than two entries)."""
    if x.size < 2:
        return True
    scale = max(1.0, float(np.max(np.abs(x))))
    return float(np.ptp(x)) <= ZERO_SPREAD_RTOL * scale


# Relative tolerance under which a measurement's spread is round-off: quantities computed in float32
# (initial ranks from singular values, 0.9999999996 to 1.0 across a grid) carry relative error near 1e-7,
# so their order below this spread is noise, and a correlation over it would rank noise.
MEASUREMENT_NOISE_RTOL = 1e-6


def varies_beyond_noise(x: np.ndarray) -> bool:
    """True when the entries spread by more than float32 round-off of their scale (MEASUREMENT_NOISE_RTOL)."""
    if x.size < 2:
        return False
    scale = max(1.0, float(np.max(np.abs(x))))
    return float(np.ptp(x)) > MEASUREMENT_NOISE_RTOL * scale


def clean_float(x: float | np.floating | None) -> float | None:
    """A plain Python float, or None for None / NaN / inf, so that tables never show NaN."""
    if x is None:
        return None
    value = float(x)
    return value if np.isfinite(value) else None
