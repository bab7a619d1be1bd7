"""What a results page shows (service.api.results.choose_results): the studies and final-phase trials of a
dataset, on a metric with its direction from the metric table; and the study driver's own results of a
study (studies.store.results.study_results) are the default page of that study (on SQLite and PostgreSQL).
The HTTP side is tested in tests/service/api/routes/test_results*.py."""

from __future__ import annotations

import pytest

from service.api.errors import NoResultsError, UnknownDatasetError, UnknownMetricError
from service.api.results import ALL_STUDIES, choose_results, results_table
from studies.store import session_scope
from studies.store.results import study_results
from tests.factories import add_study, add_trial

ACCURACY = {"autonorm_s": (0.95, 0.96, 0.94), "frozen_ln": (0.90, 0.91, 0.89), "dyt": (0.905, 0.90, 0.895)}


def _study(engine, values=ACCURACY, *, phase="final") -> str:
    with session_scope(engine) as session:
        study_id = add_study(session).id
        for method, by_seed in values.items():
            for seed, value in enumerate(by_seed):
                add_trial(
                    session,
                    study_id,
                    f"{study_id}-{phase}-{method}-{seed}",
                    phase=phase,
                    method=method,
                    config={"method": method, "seed": seed},
                    seed=seed,
                    metrics={"test_accuracy": value, "train_loss": 1.0 - value, "gate_entropy_mean": 0.5},
                    metric_value=value,
                )
    return study_id


def test_by_default_the_newest_study_with_results_on_the_primary_metric(engine):
    older, newer = _study(engine), _study(engine)
    _study(engine, phase="tune")  # newest, but tuning trials are no results
    with session_scope(engine, readonly=True) as session:
        chosen = choose_results(session, dataset="digits")
    assert [s.id for s in chosen.studies] == [newer] != [older]
    assert (chosen.metric, chosen.metric_key, chosen.higher_is_better) == ("accuracy", None, True)
    assert len(chosen.trials) == 9


def test_all_pools_every_study_oldest_first(engine):
    first, second = _study(engine), _study(engine)
    with session_scope(engine, readonly=True) as session:
        chosen = choose_results(session, dataset="digits", study_ids=[ALL_STUDIES])
    assert [s.id for s in chosen.studies] == [first, second] and len(chosen.trials) == 18


def test_a_chosen_metric_takes_its_direction_from_the_metric_table(engine):
    _study(engine)
    with session_scope(engine, readonly=True) as session:
        chosen = choose_results(session, dataset="digits", metric="train_loss")
    assert (chosen.metric, chosen.metric_key, chosen.higher_is_better) == ("train_loss", "train_loss", False)
    rows = {row.method: row for row in results_table(chosen).rows}
    assert rows["autonorm_s"].mean == pytest.approx(0.05) and rows["frozen_ln"].is_reference


@pytest.mark.parametrize(
    ("metric", "why"),
    [("test_acuracy", "was not stored"), ("gate_entropy_mean", "has no known better direction")],
)
def test_a_metric_that_cannot_be_compared_is_refused_naming_those_that_can(engine, metric, why):
    _study(engine)
    with session_scope(engine, readonly=True) as session, pytest.raises(UnknownMetricError) as raised:
        choose_results(session, dataset="digits", metric=metric)
    assert why in str(raised.value) and "compared on test_accuracy, train_loss;" in str(raised.value)


def test_an_unknown_dataset_and_a_dataset_without_results_are_lookup_errors(engine):
    with session_scope(engine, readonly=True) as session:
        with pytest.raises(UnknownDatasetError, match="unknown dataset 'imagenet'"):
            choose_results(session, dataset="imagenet")
        with pytest.raises(NoResultsError, match="no final-phase or grid trials for 'digits'"):
            choose_results(session, dataset="digits")


def test_a_study_of_another_dataset_is_refused(engine):
    study_id = _study(engine)
    with session_scope(engine, readonly=True) as session, pytest.raises(NoResultsError, match="not a study"):
        choose_results(session, dataset="mnist_5k", study_ids=[study_id])


def test_the_drivers_results_of_a_study_are_its_default_results_page(engine):
    study_id = _study(engine)
    with session_scope(engine, readonly=True) as session:
        page = results_table(choose_results(session, dataset="digits", study_ids=[study_id]))
        saved = study_results(session, study_id=study_id)
    assert saved is not None and saved.table.to_json() == page.to_json()
