"""What GET /compare and the compare page show for two or more studies of one dataset: what each spec
sets differently from the first study's, and the paired difference of every shared row (method or grid
point) on the seeds both ran (studies.tables.between), never a pooled table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from studies.datasets import DATASET_METRICS
from studies.records import row_label
from studies.spec.diff import SpecDifference, spec_differences
from studies.store import StudyView, TrialStatus, get_study, list_trials
from studies.store.results_evidence import RESULT_PHASES
from studies.tables.between import BetweenStudies, paired_between

__all__ = ["ComparedStudy", "StudiesCompared", "compare_studies"]


@dataclass(frozen=True)
class ComparedStudy:
    study: StudyView
    differences: tuple[SpecDifference, ...]  # its spec against the first study's ([] for the first)
    paired: tuple[BetweenStudies, ...]  # this study minus the first, row by row ([] for the first)


@dataclass(frozen=True)
class StudiesCompared:
    dataset: str
    metric: str  # the dataset's primary test metric, which the differences are in
    higher_is_better: bool
    studies: tuple[ComparedStudy, ...]  # the first is the one every other is compared with


def compare_studies(session: Session, ids: Sequence[str]) -> StudiesCompared:
    """Two or more studies of one dataset side by side; a 422 at `study` for fewer than two or for
    studies of several datasets, a 404 for an unknown id."""
    if len(ids) < 2 or len(set(ids)) != len(ids):
        raise _invalid("name two or more different studies to compare", ids)
    studies = [get_study(session, study_id=study_id) for study_id in ids]
    datasets = sorted({s.dataset for s in studies})
    if len(datasets) > 1:
        raise _invalid(
            f"the studies are of several datasets ({', '.join(datasets)}): compare one dataset's", ids
        )
    dataset = datasets[0]
    metric, higher_is_better = DATASET_METRICS[dataset]
    first, first_values = studies[0], _values(session, studies[0])
    compared = [ComparedStudy(first, (), ())]
    for other in studies[1:]:
        compared.append(
            ComparedStudy(
                other,
                tuple(spec_differences(first.spec, other.spec)),
                tuple(
                    paired_between(
                        first_values,
                        _values(session, other),
                        higher_is_better=higher_is_better,
                        sequential=_sequential_note(first, other),
                    )
                ),
            )
        )
    return StudiesCompared(dataset, f"test_{metric}", higher_is_better, tuple(compared))


def _values(session: Session, study: StudyView) -> dict[str, dict[int, float | None]]:
    """{row: {seed: primary metric}} of the study's final or grid trials that succeeded."""
    values: dict[str, dict[int, float | None]] = {}
    for trial in list_trials(session, study_id=study.id, phase=RESULT_PHASES, status=TrialStatus.SUCCEEDED):
        if trial.seed is None:
            continue
        value = (
            trial.metric_value
            if trial.metric_value is not None and math.isfinite(trial.metric_value)
            else None
        )
        values.setdefault(row_label(trial.method, trial.group), {})[int(trial.seed)] = value
    return values


def _sequential_note(*studies: StudyView) -> str | None:
    chosen = [s.id for s in studies if s.spec.get("sequential")]
    if not chosen:
        return None
    return (
        f"not tested: study {', '.join(chosen)} chose its seeds look by look, and a fixed-n test of the seeds "
        "both ran would ignore its looks"
    )


def _invalid(message: str, ids: Sequence[str]) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "compare", "loc": ("query", "study"), "msg": message, "input": list(ids)}]
    )
