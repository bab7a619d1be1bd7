"""A sweep's response to each knob: the objective at each grid value of one knob, averaged over the other
knobs' values within each seed, then over seeds with a t interval (seeds are the replicates; the grid
points at one value are not)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from studies.evidence import MeanInterval
from studies.stats import summarize
from studies.tuning.model import KnobResponse, ResponsePoint, ResponseTrial
from studies.tuning.trials import TuningTrial

__all__ = ["knob_response"]

# Only the t interval is shown; a small bootstrap keeps the (unused) BCa bounds cheap.
_BOOTSTRAP_RESAMPLES = 199


def knob_response(
    trials: Sequence[TuningTrial], knob: str, values: Sequence[Any], *, confidence: float
) -> KnobResponse:
    """The objective of one method's grid `trials` at each of `values` (the knob's grid, in order)."""
    completed = [(t, v) for t in trials if (v := t.objective) is not None and knob in t.knobs]
    points = []
    for value in values:
        at_value = [(t, v) for t, v in completed if _same(t.knobs[knob], value)]
        by_seed: dict[int | None, list[float]] = {}
        for trial, objective in at_value:
            by_seed.setdefault(trial.seed, []).append(objective)
        seed_means = [sum(v) / len(v) for v in by_seed.values()]
        summary = summarize(seed_means, confidence, n_resamples=_BOOTSTRAP_RESAMPLES)
        points.append(
            ResponsePoint(
                value=value,
                objective=MeanInterval(
                    n=summary.n, mean=summary.mean, ci_low=summary.ci_low, ci_high=summary.ci_high
                ),
                trials=tuple(ResponseTrial(t.seed, objective) for t, objective in at_value),
            )
        )
    return KnobResponse(knob=knob, points=tuple(points))


def _same(stored: Any, value: Any) -> bool:
    """Equal and of the same kind: True is not 1, and None is only None (a JSON round trip keeps both)."""
    if isinstance(stored, bool) or isinstance(value, bool) or stored is None or value is None:
        return stored is value
    return bool(stored == value)
