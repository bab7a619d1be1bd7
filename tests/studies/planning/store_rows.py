"""Earlier studies in the store, as the planning tests need them: finished, with final trials whose start
and end times say how long each took."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

from studies.store import Trial, session_scope
from tests.factories import add_final_trials, add_study, finish_study, start_study

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def finished_study(
    engine: sa.Engine,
    spec: Mapping[str, Any],
    values: Mapping[str, Sequence[float]],
    *,
    seconds_per_trial: float = 60.0,
    at_once: int = 2,
    epochs: int = 20,
    start: datetime = T0,
    status: str = "succeeded",
) -> str:
    """A study of `spec` that ran its final trials ({method: [value per seed]}) `at_once` at a time, each
    `seconds_per_trial` long after reporting `epochs` epochs; ended with `status`. Its id."""
    study = add_study(engine, spec)
    start_study(engine, study.id)
    trials = add_final_trials(engine, study.id, values, metrics={"epoch": float(epochs)})
    with session_scope(engine) as session:
        for index, trial in enumerate(trials):
            begins = start + timedelta(seconds=(index // at_once) * seconds_per_trial)
            session.execute(
                sa.update(Trial)
                .where(Trial.id == trial.id)
                .values(created_at=begins, updated_at=begins + timedelta(seconds=seconds_per_trial))
            )
    finish_study(engine, study.id, status=status)
    return study.id
