"""Mechanism evidence of a results page: the chosen trials and their per-epoch histories, as studies.evidence
computes it (no FastAPI: the study driver uses it too, for its MLflow artifacts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from studies.evidence import DEFAULT_PLACEMENT, Evidence, EvidenceTrial, build_evidence
from studies.store import Phase, TrialView, study_histories
from studies.trial_config import Key

__all__ = ["RESULT_PHASES", "evidence_trial", "results_evidence"]

RESULT_PHASES = (Phase.FINAL, Phase.GRID)


def results_evidence(
    session: Session,
    *,
    trials: Sequence[TrialView],
    dataset: str,
    metric: str,
    higher_is_better: bool,
    metric_key: str | None = None,
    confidence: float = 0.95,
) -> Evidence:
    """Gate and rank evidence of `trials` (final-phase or grid trials, as the results table uses them).

    `metric` names the final metric; `metric_key` is the trials' metrics key it is read from (None: each
    trial's primary metric, `metric_value`).
    """
    histories: dict[str, list[dict[str, Any]]] = {}
    for study_id in dict.fromkeys(t.study_id for t in trials):
        histories.update(study_histories(session, study_id=study_id, phase=list(RESULT_PHASES)))
    return build_evidence(
        (evidence_trial(t, histories.get(t.trial_key, []), metric_key=metric_key) for t in trials),
        dataset=dataset,
        metric=metric,
        higher_is_better=higher_is_better,
        confidence=confidence,
    )


def evidence_trial(
    trial: TrialView, history: Sequence[Mapping[str, Any]], *, metric_key: str | None = None
) -> EvidenceTrial:
    """A stored trial as studies.evidence reads it; placement and depth come from its config."""
    config = trial.config
    knobs = _mapping(config.get(Key.KNOBS))
    overrides = _mapping(config.get(Key.MODEL_OVERRIDES))
    placement = knobs.get("norm_placement", overrides.get("norm_placement", DEFAULT_PLACEMENT))
    depth = overrides.get("depth")
    value = trial.metric_value if metric_key is None else trial.metrics.get(metric_key)
    return EvidenceTrial(
        trial_key=trial.trial_key,
        method=trial.method,
        seed=trial.seed,
        status=trial.status,
        value=value if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
        group=trial.group,
        placement=str(placement),
        depth=depth if isinstance(depth, int) and not isinstance(depth, bool) else None,
        final=dict(trial.metrics),
        history=tuple(history),
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
