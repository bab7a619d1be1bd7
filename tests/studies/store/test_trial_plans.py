"""What a study keeps of its planning: the spec fields its submitter wrote (the stored spec has every default
filled in) and the trial plan its driver resolved."""

from __future__ import annotations

import pytest

from studies.spec import StudySpec
from studies.store import (
    StudyNotFoundError,
    create_study,
    delete_study,
    session_scope,
    set_study_status,
    set_study_trial_plan,
    spec_fields_set,
    study_trial_plan,
)
from studies.store.status import StudyStatus
from tests.factories import digits_spec


def test_the_fields_a_submitter_wrote_are_kept_and_defaults_are_not():
    spec = StudySpec.model_validate({**digits_spec(), "resources": {"cpu": 2}})
    fields = spec_fields_set(spec)
    assert {"budget", "budget.epochs", "budget.batch_size", "resources", "resources.cpu"} <= set(fields)
    assert "budget.compile" not in fields and "resources.seeds_per_trial" not in fields
    written = StudySpec.model_validate({**digits_spec(), "budget": {"epochs": 1, "compile": "none"}})
    assert "budget.compile" in spec_fields_set(written)  # written as the default: still written
    assert fields == sorted(fields)


def test_a_new_study_records_its_written_fields_and_no_plan_until_its_driver_plans(engine):
    with session_scope(engine) as session:
        study = create_study(session, spec=digits_spec())
    with session_scope(engine, readonly=True) as session:
        stored = study_trial_plan(session, study_id=study.id)
    assert stored.plan is None and "budget.epochs" in stored.spec_fields_set
    assert "budget.compile" not in stored.spec_fields_set

    with session_scope(engine) as session:
        set_study_trial_plan(
            session, study_id=study.id, plan={"compile": "reduce-overhead", "seeds_per_trial": 8}
        )
        set_study_trial_plan(session, study_id=study.id, plan={"compile": "none", "seeds_per_trial": 2})
    with session_scope(engine, readonly=True) as session:
        stored = study_trial_plan(session, study_id=study.id)
    assert (
        stored.plan == {"compile": "none", "seeds_per_trial": 2} and "budget.epochs" in stored.spec_fields_set
    )


def test_a_study_with_no_row_is_unknown_and_an_unknown_study_has_no_plan(engine):
    with session_scope(engine, readonly=True) as session:
        stored = study_trial_plan(session, study_id="0" * 32)
    assert stored.spec_fields_set is None and stored.plan is None
    with pytest.raises(StudyNotFoundError), session_scope(engine) as session:
        set_study_trial_plan(session, study_id="0" * 32, plan={})


def test_the_plan_goes_with_its_study(engine):
    with session_scope(engine) as session:
        study = create_study(session, spec=digits_spec())
        set_study_trial_plan(session, study_id=study.id, plan={"compile": "none"})
        set_study_status(session, study_id=study.id, status=StudyStatus.RUNNING)
        set_study_status(session, study_id=study.id, status=StudyStatus.SUCCEEDED)
    with session_scope(engine) as session:
        deleted = delete_study(session, study_id=study.id, confirm=study.id)
    assert deleted.rows["study_trial_plans"] == 1
    with session_scope(engine, readonly=True) as session:
        assert study_trial_plan(session, study_id=study.id).plan is None
