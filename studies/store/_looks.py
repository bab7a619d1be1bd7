"""The looks of sequential studies: stored once by the study's driver, read back in look order, and summed
up for the study's JSON and its results (`sequential_summary`).

A look is stored as `LookRecord.to_json()` with its non-finite numbers as strings ("inf", "-inf", "nan"):
a statistic is infinite where a comparison's seeds agree exactly, and PostgreSQL's JSONB has no Infinity.

The sequential package loads scipy (half a second), so it is imported where a look is read or summed up,
not with the store: the reconcile loop and the CLI import the store and never read a look.

PostgreSQL's JSONB keeps no key order: the summary lists every per-method mapping in the study's order of
methods, so both backends show a look alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from studies.datasets import DATASET_METRICS
from studies.spec import SequentialDesign, StudySpec
from studies.store._studies import _get_row
from studies.store.errors import InvalidLookError, LookConflictError
from studies.store.tables import StudyLook, utcnow

if TYPE_CHECKING:
    from studies.sequential import ComparisonOutcome, LookPoint, LookRecord
    from studies.store.views import StudyView
    from studies.tables.sequential import (
        SequentialLook,
        SequentialOutcome,
        SequentialPoint,
        SequentialSummary,
        SequentialTrials,
    )

__all__ = ["design_description", "record_look", "sequential_summary", "study_looks", "study_sequential"]

# Floats of a look that a restarted driver recomputes from the same seeds: equal up to rounding (another
# scipy build may integrate the boundaries a few ulps apart), while every decision must be the same.
_REL_TOL = 1e-9
_ABS_TOL = 1e-12
_TEST_NAMES = {
    "superiority": "superiority",
    "non_inferiority": "non-inferiority",
    "equivalence": "equivalence",
}
_SPENDING_NAMES = {"obrien_fleming": "O'Brien-Fleming", "pocock": "Pocock"}


# -- storing and reading --------------------------------------------------------------------------------


def record_look(session: Session, *, study_id: str, record: LookRecord) -> None:
    """Store look `record.look` of a sequential study.

    Idempotent: a driver restarted after a look analyses the same seeds again and records the same look,
    which changes nothing. A different record for a stored look raises LookConflictError and stores
    nothing: what a look decided stays decided. A fixed-seed study, or a look outside the study's design,
    raises InvalidLookError.
    """
    design = _design_of(session, study_id)
    if not 1 <= record.look <= len(design.looks()):
        raise InvalidLookError(
            f"study '{study_id}' takes looks 1 to {len(design.looks())}; got look {record.look}"
        )
    stored = _stored_record(session, study_id, record.look)
    if stored is None:
        try:
            # A savepoint: on PostgreSQL a second driver of the study may commit the same look first; the
            # insert then fails on the primary key and the transaction stays usable for the check below.
            with session.begin_nested():
                session.add(
                    StudyLook(
                        study_id=study_id,
                        look=record.look,
                        record=_encode(record.to_json()),
                        recorded_at=utcnow(),
                    )
                )
            return
        except IntegrityError:
            stored = _stored_record(session, study_id, record.look)
            if stored is None:
                raise
    difference = _difference(stored, record)
    if difference is not None:
        raise LookConflictError(study_id, record.look, difference)


def study_looks(session: Session, study_id: str) -> list[LookRecord]:
    """Every stored look of the study, in look order ([] for a fixed-seed study or before its first look)."""
    from studies.sequential import LookRecord

    _get_row(session, study_id)  # StudyNotFoundError rather than an empty list
    rows = session.scalars(select(StudyLook).where(StudyLook.study_id == study_id).order_by(StudyLook.look))
    return [LookRecord.from_json(_decode(row.record)) for row in rows]


def study_sequential(session: Session, *, study: StudyView) -> SequentialSummary | None:
    """The sequential summary of a stored study on its primary metric, None for a fixed-seed study."""
    if study.spec.get("sequential") is None:
        return None  # no need to validate a fixed study's spec
    _, higher_is_better = DATASET_METRICS[study.dataset]
    return sequential_summary(
        StudySpec.model_validate(study.spec),
        study_looks(session, study.id),
        higher_is_better=higher_is_better,
    )


def _design_of(session: Session, study_id: str) -> SequentialDesign:
    section = _get_row(session, study_id).spec.get("sequential")
    if section is None:
        raise InvalidLookError(f"study '{study_id}' runs fixed seeds: it takes no looks")
    return SequentialDesign.model_validate(section)


def _stored_record(session: Session, study_id: str, look: int) -> LookRecord | None:
    from studies.sequential import LookRecord

    row = session.get(StudyLook, (study_id, look), populate_existing=True)
    return None if row is None else LookRecord.from_json(_decode(row.record))


# -- comparing a record with the stored one ---------------------------------------------------------------


def _difference(stored: LookRecord, new: LookRecord) -> str | None:
    """What differs between two records of one look (None: the same look), for the conflict's message."""
    for name in ("seeds_per_arm", "decisions", "open_arms", "final"):
        if getattr(stored, name) != getattr(new, name):
            return f"{name}: stored {getattr(stored, name)!r}, now {getattr(new, name)!r}"
    if set(stored.comparisons) != set(new.comparisons):
        return f"comparisons: stored {sorted(stored.comparisons)}, now {sorted(new.comparisons)}"
    for method, point in stored.comparisons.items():
        differs = _point_difference(point, new.comparisons[method])
        if differs is not None:
            return f"{method}'s {differs}"
    return None


def _point_difference(stored: LookPoint, new: LookPoint) -> str | None:
    for field in fields(stored):
        a, b = getattr(stored, field.name), getattr(new, field.name)
        if not _same_value(a, b):
            return f"{field.name}: stored {a!r}, now {b!r}"
    return None


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)
    return bool(a == b)


# -- JSON without Infinity or NaN -------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # 'inf', '-inf', 'nan': float() reads each back
    if isinstance(value, Mapping):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    return value


def _decode(record: Mapping[str, Any]) -> dict[str, Any]:
    # Only a point's numbers were encoded; its decision and every name stay strings.
    return {
        **record,
        "comparisons": {
            method: {key: _number(key, value) for key, value in point.items()}
            for method, point in record["comparisons"].items()
        },
    }


def _number(key: str, value: Any) -> Any:
    return float(value) if key != "decision" and isinstance(value, str) else value


def _finite(value: float | None) -> float | None:
    """JSON's number, or null where the value is not finite."""
    return value if value is not None and math.isfinite(value) else None


# -- the summary ------------------------------------------------------------------------------------------


def design_description(design: SequentialDesign) -> str:
    """One line: "sequential: superiority, O'Brien-Fleming, looks at 3/5/7/9/10 seeds, alpha 0.05
    family-wise" (a margin test names its margin: "non-inferiority (margin 0.01)")."""
    test = _TEST_NAMES.get(design.test, design.test)
    if design.margin is not None:
        test += f" (margin {design.margin:g})"
    looks = "/".join(str(n) for n in design.looks())
    spending = _SPENDING_NAMES.get(design.spending, design.spending)
    return f"sequential: {test}, {spending}, looks at {looks} seeds, alpha {design.alpha:g} family-wise"


def sequential_summary(
    spec: StudySpec, records: list[LookRecord], *, higher_is_better: bool
) -> SequentialSummary | None:
    """A sequential study's design, looks, outcomes and seeds (the JSON shape:
    studies.tables.sequential.SequentialSummary); None for a study without `sequential`.

    `records` are its stored looks; the summary uses those from look 1 on without a gap (a look the driver
    has not stored yet stops it there, said in `notes`). `higher_is_better`: the direction of the metric
    the looks test, the dataset's primary metric.
    """
    design = spec.sequential
    if design is None:
        return None
    from studies.sequential import SequentialMonitor

    taken, notes = _contiguous(records)
    arms = spec.sequential_arms
    monitor = SequentialMonitor.replay(
        design, taken, methods=arms, reference=spec.sequential_reference, higher_is_better=higher_is_better
    )
    seeds = _seeds_per_arm(design, arms, taken)
    return {
        "design": design.model_dump(mode="json"),
        "description": design_description(design),
        "planned_looks": design.looks(),
        "reference": spec.sequential_reference,
        "methods": arms,
        "higher_is_better": higher_is_better,
        "looks": [_look_json(record, arms) for record in taken],
        "outcomes": [_outcome_json(outcome, taken) for outcome in monitor.outcomes()],
        "seeds_per_arm": seeds,
        "trials": _trials(seeds, len(arms) * design.max_seeds),
        "open_arms": taken[-1].open_arms if taken else arms,
        "decided": monitor.decided,
        "notes": notes,
    }


def _contiguous(records: list[LookRecord]) -> tuple[list[LookRecord], list[str]]:
    """The records of looks 1, 2, ... up to the first one missing, and a note when later ones were left."""
    by_look = {record.look: record for record in records}
    taken: list[LookRecord] = []
    while len(taken) + 1 in by_look:
        taken.append(by_look[len(taken) + 1])
    left = sorted(look for look in by_look if look > len(taken))
    if not left:
        return taken, []
    note = (
        f"look {len(taken) + 1} is not stored yet (look {', '.join(map(str, left))} "
        f"{'is' if len(left) == 1 else 'are'}): the summary stops before it until the study's driver stores it"
    )
    return taken, [note]


def _seeds_per_arm(design: SequentialDesign, methods: list[str], taken: list[LookRecord]) -> dict[str, int]:
    """Seeds each arm was given: the first look's, then the next look's for every arm a look kept open."""
    planned = design.looks()
    seeds = dict.fromkeys(methods, planned[0])
    for record in taken:
        if record.look < len(planned):
            for method in record.open_arms:
                seeds[method] = planned[record.look]
    return seeds


def _trials(seeds: Mapping[str, int], fixed_design: int) -> SequentialTrials:
    run = sum(seeds.values())
    return {
        "run": run,
        "fixed_design": fixed_design,
        "saved": fixed_design - run,
        "saved_fraction": (fixed_design - run) / fixed_design if fixed_design else 0.0,
    }


def _look_json(record: LookRecord, methods: list[str]) -> SequentialLook:
    def ordered(by_method: Mapping[str, Any]) -> list[str]:
        return sorted(by_method, key=lambda m: methods.index(m) if m in methods else len(methods))

    return {
        "look": record.look,
        "seeds_per_arm": {m: record.seeds_per_arm[m] for m in ordered(record.seeds_per_arm)},
        "comparisons": {m: _point_json(record.comparisons[m]) for m in ordered(record.comparisons)},
        "decisions": {m: record.decisions[m] for m in ordered(record.decisions)},
        "open_arms": list(record.open_arms),
        "final": record.final,
    }


def _point_json(point: LookPoint) -> SequentialPoint:
    return {
        "look": point.look,
        "seeds": point.seeds,
        "fraction": point.fraction,
        "estimate": _finite(point.estimate),
        "sd": _finite(point.sd),
        "standard_error": _finite(point.standard_error),
        "z": _finite(point.z),
        "level": point.level,
        "efficacy": _finite(point.efficacy),
        "futility": _finite(point.futility),
        "decision": point.decision,
    }


def _outcome_json(outcome: ComparisonOutcome, taken: list[LookRecord]) -> SequentialOutcome:
    from studies.sequential import DECISIONS

    has_point = outcome.seeds > 0
    is_open = outcome.decision == "open"
    point = _last_point(outcome.method, taken)
    return {
        "method": outcome.method,
        "reference": outcome.reference,
        "decision": outcome.decision,
        "decision_text": DECISIONS.get(outcome.decision, outcome.decision),
        "stopped_at_look": None if is_open else _stop_look(outcome.method, taken),
        "look": outcome.stopped_at_look if has_point else None,
        "seeds": outcome.seeds,
        "tested_at_level": None if point is None else point.level,
        "estimate": _finite(outcome.estimate) if has_point else None,
        "interval": [_finite(outcome.interval[0]), _finite(outcome.interval[1])],
        "interval_level": outcome.interval_level if has_point else None,
        # The stage-wise ordering p-value is defined at the look where a comparison stops.
        "p_value": None if is_open else _finite(outcome.p_value),
    }


def _last_point(method: str, taken: list[LookRecord]) -> LookPoint | None:
    return next((r.comparisons[method] for r in reversed(taken) if method in r.comparisons), None)


def _stop_look(method: str, taken: list[LookRecord]) -> int | None:
    """The first look after which the comparison was no longer open."""
    return next((r.look for r in taken if r.decisions.get(method, "open") != "open"), None)
