"""The looks of a sequential study: stored once as its driver takes them, never overwritten, read back in
look order, replayed to the monitor the driver held, and summed up (design, looks, outcomes, seeds and
trials saved) on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import replace

import pytest
import sqlalchemy as sa

from studies.sequential import DECISIONS, LookRecord, SequentialMonitor
from studies.spec import StudySpec
from studies.store import (
    InvalidLookError,
    LookConflictError,
    StudyNotFoundError,
    get_study,
    make_engine,
    record_look,
    sequential_summary,
    session_scope,
    study_looks,
    study_sequential,
)
from tests.factories import add_study, digits_spec
from tests.studies.store.sequential_study import ACCURACY, SPEC, add_sequential_study, take_looks

STUDY_SPEC = StudySpec.model_validate(SPEC)


def _record(engine, study_id: str, record: LookRecord) -> None:
    with session_scope(engine) as session:
        record_look(session, study_id=study_id, record=record)


def _looks(engine, study_id: str) -> list[LookRecord]:
    with session_scope(engine, readonly=True) as session:
        return study_looks(session, study_id)


def _rows(engine) -> list[tuple[str, int, object]]:
    with engine.connect() as connection:
        return list(connection.execute(sa.text("SELECT study_id, look, recorded_at FROM study_looks")))


# -- storing and reading ----------------------------------------------------------------------------------


def test_the_looks_come_back_in_look_order_whatever_order_they_were_stored_in(engine):
    monitor, _ = take_looks(SPEC, ACCURACY)
    study_id = add_study(engine, SPEC).id
    for record in reversed(monitor.records):  # a look whose first write failed is stored late
        _record(engine, study_id, record)
    assert _looks(engine, study_id) == monitor.records
    assert [r.look for r in monitor.records] == [1, 2, 3, 4]


def test_recording_the_same_look_again_changes_nothing(engine):
    study_id, monitor = add_sequential_study(engine, looks=2)
    before = _rows(engine)
    # A driver restarted after look 2 analyses the same seeds again and records the same looks.
    again, _ = take_looks(SPEC, ACCURACY, looks=2)
    for record in again.records:
        _record(engine, study_id, record)
        _record(engine, study_id, LookRecord.from_json(record.to_json()))
    assert _rows(engine) == before
    assert _looks(engine, study_id) == monitor.records


def test_two_drivers_recording_the_same_look_at_once_store_it_once(database_url, engine):
    monitor, _ = take_looks(SPEC, ACCURACY, looks=1)
    study_id = add_study(engine, SPEC).id
    first_written, second_started = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def second_driver() -> None:
        own = make_engine(database_url)
        try:
            assert first_written.wait(30)
            second_started.set()
            # PostgreSQL: waits on the first driver's uncommitted row, then finds it committed. SQLite: waits
            # for the first driver's write lock, then reads the look.
            _record(own, study_id, monitor.records[0])
        except BaseException as exc:
            failures.append(exc)
        finally:
            own.dispose()

    thread = threading.Thread(target=second_driver)
    thread.start()
    with session_scope(engine) as session:
        record_look(session, study_id=study_id, record=monitor.records[0])
        first_written.set()
        assert second_started.wait(30)
        time.sleep(0.5)  # the second driver is waiting on this transaction by now
    thread.join(60)
    assert not thread.is_alive() and failures == []
    assert _looks(engine, study_id) == monitor.records


def test_numbers_a_rounding_error_apart_are_the_same_look(engine):
    study_id, monitor = add_sequential_study(engine, looks=1)
    first = monitor.records[0]
    point = first.comparisons["dyt"]
    nudged = replace(point, estimate=point.estimate * (1 + 1e-13), efficacy=point.efficacy + 1e-14)
    _record(engine, study_id, replace(first, comparisons={**first.comparisons, "dyt": nudged}))
    assert _looks(engine, study_id) == [first]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: replace(r, decisions={**r.decisions, "dyt": "efficacy"}), "decisions"),
        (lambda r: replace(r, open_arms=["frozen_ln", "autonorm"]), "open_arms"),
        (lambda r: replace(r, seeds_per_arm={**r.seeds_per_arm, "dyt": 2}), "seeds_per_arm"),
        (
            lambda r: replace(
                r, comparisons={**r.comparisons, "dyt": replace(r.comparisons["dyt"], estimate=0.05)}
            ),
            "dyt's estimate",
        ),
    ],
    ids=["decision", "open-arms", "seeds", "estimate"],
)
def test_a_different_record_for_a_stored_look_is_refused_and_the_stored_one_kept(engine, change, named):
    study_id, monitor = add_sequential_study(engine, looks=1)
    with pytest.raises(LookConflictError, match="look 1") as refused:
        _record(engine, study_id, change(monitor.records[0]))
    assert named in str(refused.value) and "never overwritten" in str(refused.value)
    assert _looks(engine, study_id) == monitor.records


def test_a_statistic_of_seeds_that_agree_exactly_is_stored_and_read_back(engine):
    # DyT is exactly one point better on every seed: no spread, an infinite statistic, which JSONB cannot
    # hold as a number.
    values = {**ACCURACY, "dyt": [v + 0.01 for v in ACCURACY["frozen_ln"]]}
    study_id, monitor = add_sequential_study(engine, values=values, looks=1)
    (stored,) = _looks(engine, study_id)
    assert stored == monitor.records[0]
    assert math.isinf(stored.comparisons["dyt"].z) and stored.decisions["dyt"] == "efficacy"
    with session_scope(engine, readonly=True) as session:
        summary = study_sequential(session, study=get_study(session, study_id=study_id))
    assert summary is not None
    assert summary["looks"][0]["comparisons"]["dyt"]["z"] is None  # JSON has no infinity: null
    json.dumps(summary, allow_nan=False)


def test_a_fixed_study_a_look_outside_the_design_and_an_unknown_study_are_refused(engine):
    monitor, _ = take_looks(SPEC, ACCURACY)
    fixed = add_study(engine, digits_spec()).id
    with pytest.raises(InvalidLookError, match="fixed seeds"):
        _record(engine, fixed, monitor.records[0])
    sequential = add_study(engine, SPEC).id
    with pytest.raises(InvalidLookError, match="looks 1 to 4; got look 5"):
        _record(engine, sequential, replace(monitor.records[-1], look=5))
    with pytest.raises(StudyNotFoundError):
        _record(engine, "0" * 32, monitor.records[0])
    with pytest.raises(StudyNotFoundError):
        _looks(engine, "0" * 32)
    assert _looks(engine, fixed) == [] and _rows(engine) == []


def test_deleting_a_study_deletes_its_looks(engine):
    study_id, _ = add_sequential_study(engine)
    assert len(_rows(engine)) == 4
    with session_scope(engine) as session:
        session.execute(sa.text("DELETE FROM studies WHERE id = :id"), {"id": study_id})
    assert _rows(engine) == []


def test_the_stored_looks_replay_to_the_monitor_the_driver_held(engine):
    study_id, live = add_sequential_study(engine)
    replayed = SequentialMonitor.replay(
        STUDY_SPEC.sequential,
        _looks(engine, study_id),
        methods=STUDY_SPEC.methods,
        reference=STUDY_SPEC.reference,
        higher_is_better=True,
    )
    assert replayed.to_json() == live.to_json()
    assert replayed.outcomes() == live.outcomes()


# -- the summary ------------------------------------------------------------------------------------------


def test_a_decided_studys_summary_says_where_each_comparison_stopped_and_what_the_looks_saved():
    monitor, _ = take_looks(SPEC, ACCURACY)
    summary = sequential_summary(STUDY_SPEC, monitor.records, higher_is_better=True)
    assert summary is not None
    assert summary["description"] == (
        "sequential: superiority, O'Brien-Fleming, looks at 3/5/7/9 seeds, alpha 0.05 family-wise"
    )
    assert summary["design"] == STUDY_SPEC.sequential.model_dump(mode="json")
    assert (summary["planned_looks"], summary["reference"]) == ([3, 5, 7, 9], "frozen_ln")
    assert summary["seeds_per_arm"] == {"frozen_ln": 9, "dyt": 5, "autonorm": 9}
    assert summary["trials"] == {"run": 23, "fixed_design": 27, "saved": 4, "saved_fraction": 4 / 27}
    assert (summary["open_arms"], summary["decided"], summary["notes"]) == ([], True, [])
    assert [look["look"] for look in summary["looks"]] == [1, 2, 3, 4]
    assert set(summary["looks"][2]["comparisons"]) == {"autonorm"}  # DyT stopped at look 2
    outcomes = {o["method"]: o for o in summary["outcomes"]}
    live = {o.method: o for o in monitor.outcomes()}
    dyt = outcomes["dyt"]
    assert (dyt["decision"], dyt["decision_text"]) == ("efficacy", DECISIONS["efficacy"])
    assert (dyt["stopped_at_look"], dyt["look"], dyt["seeds"]) == (2, 2, 5)
    assert (
        dyt["interval"] == list(live["dyt"].interval)
        and dyt["interval_level"] == live["dyt"].interval_level == 1 - 0.05 / 2
    )
    assert dyt["estimate"] == live["dyt"].estimate and dyt["p_value"] == live["dyt"].p_value
    assert dyt["interval"][0] > 0.0  # the repeated interval excludes no difference: a decided efficacy
    assert (outcomes["autonorm"]["stopped_at_look"], outcomes["autonorm"]["seeds"]) == (4, 9)
    # Holm's step-down: DyT was tested at 0.05 / 2 and, once it was rejected, AutoNorm at the whole 0.05.
    assert (dyt["tested_at_level"], outcomes["autonorm"]["tested_at_level"]) == (0.025, 0.05)
    json.dumps(summary, allow_nan=False)


def test_a_running_studys_open_comparisons_have_an_interval_but_no_p_value_yet():
    monitor, _ = take_looks(SPEC, ACCURACY, looks=1)
    summary = sequential_summary(STUDY_SPEC, monitor.records, higher_is_better=True)
    assert summary is not None
    # Every arm trains look 2's seeds now: 5 each so far.
    assert summary["seeds_per_arm"] == dict.fromkeys(STUDY_SPEC.methods, 5)
    assert summary["trials"]["run"] == 15 and summary["open_arms"] == STUDY_SPEC.methods
    for outcome in summary["outcomes"]:
        assert (outcome["decision"], outcome["stopped_at_look"], outcome["look"]) == ("open", None, 1)
        assert outcome["p_value"] is None  # defined where a comparison stops
        low, high = outcome["interval"]
        assert low is not None and high is not None and low < outcome["estimate"] < high


def test_before_the_first_look_every_arm_trains_the_first_seeds_and_nothing_is_estimated():
    summary = sequential_summary(STUDY_SPEC, [], higher_is_better=True)
    assert summary is not None
    assert summary["seeds_per_arm"] == dict.fromkeys(STUDY_SPEC.methods, 3) and summary["looks"] == []
    assert summary["outcomes"][0] == {
        "method": "dyt",
        "reference": "frozen_ln",
        "decision": "open",
        "decision_text": DECISIONS["open"],
        "stopped_at_look": None,
        "look": None,
        "seeds": 0,
        "tested_at_level": None,
        "estimate": None,
        "interval": [None, None],
        "interval_level": None,
        "p_value": None,
    }


def test_a_look_not_stored_yet_stops_the_summary_before_it_and_says_so():
    monitor, _ = take_looks(SPEC, ACCURACY)
    first, _, third, _ = monitor.records
    summary = sequential_summary(STUDY_SPEC, [third, first], higher_is_better=True)
    assert summary is not None
    assert [look["look"] for look in summary["looks"]] == [1]
    assert summary["notes"] == [
        "look 2 is not stored yet (look 3 is): the summary stops before it until the study's driver stores it"
    ]


def test_a_fixed_study_has_no_summary(engine):
    spec = StudySpec.model_validate(digits_spec())
    assert sequential_summary(spec, [], higher_is_better=True) is None
    study_id = add_study(engine, spec).id
    with session_scope(engine, readonly=True) as session:
        assert study_sequential(session, study=get_study(session, study_id=study_id)) is None


@pytest.mark.parametrize(
    ("design", "line"),
    [
        (
            {"test": "non_inferiority", "margin": 0.01, "spending": "pocock", "max_seeds": 7},
            "sequential: non-inferiority (margin 0.01), Pocock, looks at 3/5/7 seeds, alpha 0.05 family-wise",
        ),
        (
            {"test": "equivalence", "margin": 0.02, "alpha": 0.1, "first_seeds": 4, "seeds_per_look": 3},
            "sequential: equivalence (margin 0.02), O'Brien-Fleming, looks at 4/7/10 seeds, alpha 0.1 "
            "family-wise",
        ),
    ],
)
def test_the_design_line_names_the_test_its_margin_the_spending_the_looks_and_alpha(design, line):
    spec = StudySpec.model_validate({**SPEC, "sequential": design})
    summary = sequential_summary(spec, [], higher_is_better=True)
    assert summary is not None and summary["description"] == line
