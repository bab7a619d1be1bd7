"""A study's completeness from the store (what /results states for each study it shows), and progress that
never falls while a resumed experiment runs an ended trial again."""

from __future__ import annotations

from studies.sequential import LookRecord
from studies.spec import StudySpec
from studies.store import get_study, session_scope
from studies.store.completeness import planned_result_trials, read_completeness
from tests.factories import (
    add_final_trials,
    add_study,
    add_trial,
    digits_spec,
    finish_study,
    start_study,
    trial_key,
)

FIXED = digits_spec(name="fixed", methods=["frozen_ln", "dyt"], seeds=[0, 1, 2])


def _look(look: int, open_arms: list[str]) -> LookRecord:
    return LookRecord(look=look, seeds_per_arm={}, comparisons={}, decisions={}, open_arms=open_arms,
                      final=not open_arms)  # fmt: skip


def test_a_fixed_study_plans_every_method_on_every_seed_and_a_grid_every_point_too():
    fixed = StudySpec.model_validate(FIXED)
    assert [p.label for p in planned_result_trials(fixed)] == [
        *(f"frozen_ln seed {s}" for s in range(3)),
        *(f"dyt seed {s}" for s in range(3)),
    ]
    grid = StudySpec.model_validate(
        digits_spec(
            kind="grid",
            methods=["dyt"],
            seeds=[0, 1],
            search={"skip_scale": {"type": "grid", "values": [0.5, 1.0]}},
        )
    )
    assert [(p.phase, p.group, p.seed) for p in planned_result_trials(grid)] == [
        ("grid", "skip_scale=0.5", 0),
        ("grid", "skip_scale=0.5", 1),
        ("grid", "skip_scale=1.0", 0),
        ("grid", "skip_scale=1.0", 1),
    ]


def test_a_sequential_study_plans_the_seeds_its_looks_gave_each_arm():
    data = {k: v for k, v in digits_spec(methods=["frozen_ln", "dyt", "autonorm"]).items() if k != "seeds"}
    spec = StudySpec.model_validate(
        {**data, "sequential": {"first_seeds": 2, "seeds_per_look": 1, "max_seeds": 4, "effect": 0.02}}
    )
    # Before any look: the first look's seeds for every method.
    assert len(planned_result_trials(spec)) == 6
    # Look 1 left dyt open (with its reference), look 2 closed everything: dyt and frozen_ln took seed 2.
    planned = planned_result_trials(spec, [_look(1, ["frozen_ln", "dyt"]), _look(2, [])])
    assert sorted(p.label for p in planned if p.seed == 2) == ["dyt seed 2", "frozen_ln seed 2"]
    assert not any(p.seed == 3 for p in planned)


def test_a_sequential_grid_plans_the_seeds_its_looks_gave_each_point():
    data = {k: v for k, v in digits_spec(methods=["frozen_ln", "dyt"]).items() if k != "seeds"}
    low, high = "frozen_ln [skip_scale=0.5]", "frozen_ln [skip_scale=1.0]"
    spec = StudySpec.model_validate(
        {
            **data,
            "kind": "grid",
            "method_search": {"frozen_ln": {"skip_scale": {"type": "grid", "values": [0.5, 1.0]}}},
            "sequential": {
                "first_seeds": 2,
                "seeds_per_look": 1,
                "max_seeds": 3,
                "effect": 0.02,
                "pairs": [[low, high]],
            },
        }
    )
    # Look 1 left the pair open: both of its points take seed 2; dyt, in no pair, only the first look's.
    planned = planned_result_trials(spec, [_look(1, [low, high]), _look(2, [])])
    assert sorted((p.method, p.group, p.seed) for p in planned if p.seed == 2) == [
        ("frozen_ln", "skip_scale=0.5", 2),
        ("frozen_ln", "skip_scale=1.0", 2),
    ]
    assert [(p.phase, p.seed) for p in planned if p.method == "dyt"] == [("grid", 0), ("grid", 1)]


def test_a_study_marked_succeeded_with_final_trials_missing_is_incomplete_and_says_which(engine):
    study = add_study(engine, FIXED)
    start_study(engine, study.id)
    add_final_trials(engine, study.id, {"frozen_ln": [0.8, 0.81, 0.79], "dyt": [0.7]})
    finish_study(engine, study.id)
    with session_scope(engine, readonly=True) as session:
        (completeness,) = read_completeness(session, [get_study(session, study_id=study.id)])
    assert not completeness.complete
    assert (completeness.planned, completeness.recorded, completeness.succeeded) == (6, 4, 4)
    assert [p.label for p in completeness.missing] == ["dyt seed 1", "dyt seed 2"]
    assert completeness.reason.startswith("incomplete: the study is marked succeeded but 4 of 6")
    assert completeness.to_json()["missing"] == ["dyt seed 1", "dyt seed 2"]


def test_a_succeeded_study_with_every_outcome_is_complete_failed_trials_included(engine):
    study = add_study(engine, FIXED)
    start_study(engine, study.id)
    add_final_trials(engine, study.id, {"frozen_ln": [0.8, 0.81, 0.79], "dyt": [0.7, 0.71]})
    add_trial(engine, study.id, trial_key(study.id, "final", "dyt", 2), seed=2, status="failed", error="nan")
    finish_study(engine, study.id)
    with session_scope(engine, readonly=True) as session:
        (completeness,) = read_completeness(session, [get_study(session, study_id=study.id)])
    assert completeness.complete and (completeness.recorded, completeness.succeeded) == (6, 5)


def test_a_running_study_is_incomplete_whatever_it_holds(engine):
    study = add_study(engine, FIXED)
    start_study(engine, study.id)
    add_final_trials(engine, study.id, {"frozen_ln": [0.8, 0.81, 0.79], "dyt": [0.7, 0.71, 0.72]})
    with session_scope(engine, readonly=True) as session:
        (completeness,) = read_completeness(session, [get_study(session, study_id=study.id)])
    assert not completeness.complete and completeness.reason.startswith("incomplete: the study is running")


def test_progress_never_falls_when_a_resumed_experiment_runs_an_ended_trial_again(engine):
    """The issue's "done 2 -> 1": a resumed driver's Tune starts again a trial whose end its snapshot missed
    (or that failed); the row keeps its outcome until the trial ends again, and the new end replaces it."""
    study = add_study(engine, FIXED)
    start_study(engine, study.id)
    ended = trial_key(study.id, "final", "dyt", 0)
    failed = trial_key(study.id, "final", "dyt", 1)
    add_trial(engine, study.id, ended, seed=0, metric_value=0.7, metrics={"test_accuracy": 0.7})
    add_trial(engine, study.id, failed, seed=1, status="failed", error="diverged")
    with session_scope(engine, readonly=True) as session:
        before = get_study(session, study_id=study.id).progress.done
    add_trial(engine, study.id, ended, seed=0, status="running")  # the resumed experiment starts them again
    add_trial(engine, study.id, failed, seed=1, status="running")
    with session_scope(engine, readonly=True) as session:
        resumed = get_study(session, study_id=study.id)
    assert before == resumed.progress.done == 2
    add_trial(engine, study.id, failed, seed=1, status="succeeded", metric_value=0.72)  # it ends again
    with session_scope(engine, readonly=True) as session:
        progress = get_study(session, study_id=study.id).progress
    assert (progress.done, progress.succeeded, progress.failed, progress.running) == (2, 2, 0, 0)
