"""A sequential study for the tests: its spec, every seed's test accuracy, and the looks its driver takes.

On these numbers DyT beats FrozenLN by about three points on every seed, so its comparison stops at look 2
(5 seeds); AutoNorm is about one point better with a wider spread and is decided at the last look (9
seeds). The reference trains while any comparison is open: 9 + 5 + 9 = 23 final trials instead of the fixed
design's 27.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from studies.datasets import DATASET_METRICS
from studies.sequential import SequentialMonitor
from studies.spec import StudySpec
from studies.store import record_look, session_scope
from tests.factories import add_study, add_trial

SPEC: dict[str, Any] = {
    "name": "sequential",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "methods": ["frozen_ln", "dyt", "autonorm"],
    "budget": {"epochs": 10, "batch_size": 64},
    "sequential": {"first_seeds": 3, "seeds_per_look": 2, "max_seeds": 9, "effect": 0.01},
}
# Looks at 3, 5, 7 and 9 seeds per arm.
ACCURACY: dict[str, list[float]] = {
    "frozen_ln": [0.9037, 0.9253, 0.911, 0.9111, 0.9065, 0.9038, 0.9069, 0.9, 0.893],
    "dyt": [0.932, 0.9531, 0.9417, 0.9424, 0.94, 0.935, 0.9377, 0.9316, 0.9232],
    "autonorm": [0.8989, 0.9384, 0.9149, 0.9191, 0.9115, 0.9283, 0.9206, 0.9092, 0.8927],
}


def take_looks(
    spec: Mapping[str, Any], values: Mapping[str, Sequence[float]], *, looks: int | None = None
) -> tuple[SequentialMonitor, dict[str, int]]:
    """The looks a study's driver takes on `values` (every seed's primary metric): every arm trains the
    first look's seeds, then only the arms a look keeps open train the next look's. `looks`: stop after so
    many. Returns the monitor and the seeds each arm trained for the looks taken."""
    study = StudySpec.model_validate(spec)
    design = study.sequential
    assert design is not None
    monitor = SequentialMonitor(
        design,
        methods=list(study.methods),
        reference=study.reference,
        higher_is_better=DATASET_METRICS[study.dataset][1],
    )
    trained = dict.fromkeys(study.methods, 0)
    arms = list(study.methods)
    for count in design.looks()[:looks]:
        trained.update(dict.fromkeys(arms, count))
        monitor.look({m: {s: values[m][s] for s in range(n)} for m, n in trained.items()})
        arms = monitor.open_arms()
        if not arms:
            break
    return monitor, trained


def add_sequential_study(
    engine: sa.Engine,
    spec: Mapping[str, Any] = SPEC,
    values: Mapping[str, Sequence[float]] = ACCURACY,
    *,
    looks: int | None = None,
) -> tuple[str, SequentialMonitor]:
    """The study as its driver leaves it after `looks` looks (None: all it takes): a succeeded final trial
    per seed each arm trained (its value as metric_value and test_accuracy, 1 - value as train_loss), and
    every look stored. Returns the study id and the driver's monitor."""
    monitor, trained = take_looks(spec, values, looks=looks)
    with session_scope(engine) as session:
        study_id = add_study(session, spec).id
        for method, seeds in trained.items():
            for seed in range(seeds):
                value = values[method][seed]
                add_trial(
                    session,
                    study_id,
                    f"{study_id}/final/{method}/seed{seed}",
                    method=method,
                    seed=seed,
                    metrics={"test_accuracy": value, "train_loss": 1.0 - value},
                    metric_value=value,
                )
        for record in monitor.records:
            record_look(session, study_id=study_id, record=record)
    return study_id, monitor
