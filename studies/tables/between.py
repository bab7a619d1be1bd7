"""The paired difference between two studies of one dataset, row by row: what changing the spec did.

Two studies that ran the same method (or grid point) on the same seeds pair by seed: each seed fixes the
split, the initialisation and the data order in both, so d_s = study b - study a isolates what their
specs set differently. Each row is a paired t over the seeds both studies have (studies.stats), Holm-
adjusted across rows. A sequential study's seeds were chosen by its looks, so a fixed-n test of them
would ignore the looks: such a pair is "not tested", as pooling it is in /results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from studies.stats import adjust, compare_by_seed

__all__ = ["BetweenStudies", "paired_between"]

SeedValues = Mapping[int, float | None]


@dataclass(frozen=True)
class BetweenStudies:
    """One row's difference, study b minus study a, in the metric's units."""

    row: str  # the method, or a grid point's results row
    seeds: int  # seeds both studies have a value for
    difference: float | None
    low: float | None  # the paired t interval at `confidence`
    high: float | None
    confidence: float
    p_value: float | None
    p_adjusted: float | None  # Holm across the rows
    note: str


def paired_between(
    a: Mapping[str, SeedValues],
    b: Mapping[str, SeedValues],
    *,
    higher_is_better: bool,
    confidence: float = 0.95,
    sequential: str | None = None,
) -> list[BetweenStudies]:
    """Every row both studies ran ({row: {seed: value}} each), in a's order; `sequential`: why the pair
    cannot be tested (a study's seeds were chosen by its looks), None when both ran fixed seeds."""
    shared = [row for row in a if row in b]
    if sequential is not None:
        return [
            BetweenStudies(row, 0, None, None, None, confidence, None, None, sequential) for row in shared
        ]
    comparisons = [
        compare_by_seed(
            b[row], a[row], confidence=confidence, higher_is_better=higher_is_better, on_mismatch="intersect"
        )
        for row in shared
    ]
    paired = [c if c.paired else None for c in comparisons]
    adjusted = adjust([c.p_value if c is not None else None for c in paired], "holm")
    rows = []
    for row, comparison, p_adjusted in zip(shared, paired, adjusted, strict=True):
        if comparison is None:
            rows.append(
                BetweenStudies(
                    row, 0, None, None, None, confidence, None, None, "fewer than two shared seeds"
                )
            )
            continue
        rows.append(
            BetweenStudies(
                row=row,
                seeds=comparison.n,
                difference=comparison.diff_mean,
                low=comparison.diff_ci_low,
                high=comparison.diff_ci_high,
                confidence=confidence,
                p_value=comparison.p_value,
                p_adjusted=p_adjusted,
                note="; ".join(comparison.warnings),
            )
        )
    return rows
