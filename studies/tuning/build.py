"""A study's tuning views from its spec and trials: per tuned method, knob importance and the optimisation
history of its tune trials (kind compare); per swept method of a sweep, knob importance and the response
to each knob over its grid trials (kind grid)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from studies.search_space import grid_distribution, optuna_space
from studies.spec import DATASET_METRICS, Grid, StudySpec, higher_is_better
from studies.stats.summary import check_confidence
from studies.tuning.history import optimisation_history
from studies.tuning.importance import method_importance
from studies.tuning.model import MethodTuning, StudyTuning
from studies.tuning.response import knob_response
from studies.tuning.trials import TuningTrial

__all__ = ["TUNING_PHASES", "study_tuning"]

# The phase whose trials each kind of study is tuned on: a compare study's tune phase, a sweep's grid.
TUNING_PHASES = {"compare": "tune", "grid": "grid"}


def study_tuning(
    spec: StudySpec,
    trials: Iterable[TuningTrial],
    *,
    study_id: str,
    confidence: float = 0.95,
) -> StudyTuning | None:
    """The tuning views of a study from its `trials` of phase TUNING_PHASES[spec.kind], in start order;
    None when no method has a knob that takes more than one value (no tune phase, no sweep)."""
    confidence = check_confidence(confidence)
    primary = DATASET_METRICS[spec.dataset][0]
    higher = higher_is_better(spec.dataset, primary)
    by_method: dict[str, list[TuningTrial]] = {m: [] for m in spec.methods}
    for trial in trials:
        by_method.setdefault(trial.method, []).append(trial)
    if spec.kind == "grid":
        methods = [
            tuning
            for m in spec.methods
            if (tuning := _swept_method(spec, m, by_method[m], higher, confidence)) is not None
        ]
        objective = f"test_{primary}"  # a grid trial reports on the test split
    else:
        methods = [_tuned_method(spec, m, by_method[m], higher) for m in spec.methods if spec.tunes(m)]
        objective = f"val_{primary}"  # the tune phase's objective: the validation metric
    if not methods:
        return None
    return StudyTuning(
        study_id=study_id,
        study_name=spec.name,
        phase=TUNING_PHASES[spec.kind],
        objective=objective,
        higher_is_better=higher,
        confidence=confidence,
        methods=tuple(methods),
    )


def _tuned_method(spec: StudySpec, method: str, trials: Sequence[TuningTrial], higher: bool) -> MethodTuning:
    space = optuna_space(spec.search_space_for(method))
    return MethodTuning(
        method=method,
        importance=method_importance(trials, space, higher_is_better=higher, what="tune trials"),
        history=optimisation_history(trials, list(space), higher_is_better=higher),
    )


def _swept_method(
    spec: StudySpec, method: str, trials: Sequence[TuningTrial], higher: bool, confidence: float
) -> MethodTuning | None:
    grid = {k: list(d.values) for k, d in spec.search_space_for(method).items() if isinstance(d, Grid)}
    if all(len(values) < 2 for values in grid.values()):
        return None  # the grid does not vary any knob of this method (e.g. a baseline at one tau)
    return MethodTuning(
        method=method,
        importance=method_importance(
            trials,
            {k: grid_distribution(values) for k, values in grid.items()},
            higher_is_better=higher,
            what="grid trials",
        ),
        response=tuple(
            knob_response(trials, knob, values, confidence=confidence)
            for knob, values in grid.items()
            if len(values) > 1
        ),
    )
