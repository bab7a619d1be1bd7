"""The optimisation history of a method's tune phase: the objective of each tune trial in the order the
study started them, and the best objective so far (what the tuner had found by then)."""

from __future__ import annotations

from collections.abc import Sequence

from studies.tuning.model import HistoryPoint, OptimisationHistory
from studies.tuning.trials import TuningTrial

__all__ = ["optimisation_history"]


def optimisation_history(
    trials: Sequence[TuningTrial], knobs: Sequence[str], *, higher_is_better: bool
) -> OptimisationHistory:
    """Every trial of `trials` (one method's, in start order), failed and running ones included with no
    value; `knobs`: the swept knobs each point lists. The best is the first trial with the best value, as
    the driver picks the knobs its final phase runs with."""
    points: list[HistoryPoint] = []
    best: tuple[int, float] | None = None
    for number, trial in enumerate(trials):
        value = trial.objective
        if value is not None and (best is None or _better(value, best[1], higher_is_better)):
            best = (number, value)
        points.append(
            HistoryPoint(
                number=number,
                trial_key=trial.trial_key,
                status=trial.status,
                value=value,
                best_so_far=None if best is None else best[1],
                params={k: trial.knobs[k] for k in knobs if k in trial.knobs},
                epochs=trial.epochs,
            )
        )
    return OptimisationHistory(points=tuple(points), best_number=None if best is None else best[0])


def _better(value: float, than: float, higher_is_better: bool) -> bool:
    return value > than if higher_is_better else value < than
