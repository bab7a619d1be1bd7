"""What a rendering of /results asks for, shared by the table (service.api.routes.results) and its figures
(service.api.routes.figures): the query parameters that choose the studies, metric, reference, interval and
adjustment (ResultsQuery, one dependency), the one read-only unit of work that reads them from the store
with the stored studies' plugin records visible (results_in_view), and the tuning views built after it from
what it read. A figure is asked for with the same parameters as its table, so an exported figure is the one
the page with those parameters shows."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import Depends, Query
from sqlalchemy.orm import Session

from service.api.extensions import studies_visible
from service.api.load_shedding import DatabaseGate
from service.api.results import ResultsSelection, choose_results, refuse_mixed_pool, selection_evidence
from service.api.routes.text import StorableText
from studies.evidence import Evidence

if TYPE_CHECKING:
    from studies.tuning import StudyTuning, TuningTrial

    # What one read of /results gives: the selection, its evidence and each study's tuning trials.
    Selection = tuple[ResultsSelection, Evidence | None, dict[str, list[TuningTrial]]]

__all__ = [
    "AdjustQuery",
    "ConfidenceQuery",
    "MetricQuery",
    "PoolQuery",
    "ReferenceQuery",
    "ResultsQuery",
    "ResultsQueryDep",
    "StudyQuery",
    "read_selection",
    "results_in_view",
    "split_ids",
    "tuning_views",
]

StudyQuery = Annotated[
    list[StorableText] | None,
    Query(description="study id(s), repeat or comma-separate; `all` pools every study; default: the newest"),
]
MetricQuery = Annotated[
    str | None,
    Query(
        min_length=1,  # empty names no metric: leave it out for the primary one
        description="a key of the trials' metrics with a known better direction (e.g. "
        "test_accuracy_corruption_mean, train_loss); default: the dataset's primary metric",
    ),
]
ReferenceQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        description="reference row: a method of the table, or a row label (`method [grid point]`) where "
        "the method has several rows; one that picks no single row is a 422 naming the rows; default: "
        "the study's reference",
    ),
]
ConfidenceQuery = Annotated[float, Query(gt=0.5, lt=1.0)]
AdjustQuery = Literal["holm", "bh", "none"]
PoolQuery = Annotated[
    bool,
    Query(
        description="pool named studies whose specs differ in more than their seeds (without it that is a "
        "422 naming the differences: their trials would mix two experiments; /compare shows them side by "
        "side); `study=all` pools every study of the dataset as asked"
    ),
]


@dataclass(frozen=True)
class ResultsQuery:
    """The query parameters of every rendering of /results (FastAPI reads them from these fields)."""

    study: StudyQuery = None
    metric: MetricQuery = None
    reference: ReferenceQuery = None
    confidence: ConfidenceQuery = 0.95
    adjust: AdjustQuery = "holm"
    pool: PoolQuery = False


ResultsQueryDep = Annotated[ResultsQuery, Depends()]


@contextlib.asynccontextmanager
async def results_in_view(
    database: DatabaseGate, *, dataset: str, query: ResultsQuery, with_evidence: bool
) -> AsyncIterator[Selection]:
    """What read_selection reads for `query`; within the block (the rendering too, its worker thread
    included) the plugin methods and user datasets of the dataset's stored studies are known."""
    async with studies_visible(database, dataset=dataset):
        yield await database.read(
            partial(
                read_selection,
                dataset=dataset,
                study_ids=split_ids(query.study),
                metric=query.metric,
                confidence=query.confidence,
                with_evidence=with_evidence,
                pool=query.pool,
            )
        )


def read_selection(
    session: Session,
    *,
    dataset: str,
    study_ids: list[str],
    metric: str | None,
    confidence: float,
    with_evidence: bool,
    pool: bool = False,
) -> tuple[ResultsSelection, Evidence | None, dict[str, list[TuningTrial]]]:
    """The selection, and with `with_evidence` its evidence and each study's tuning trials."""
    chosen = choose_results(session, dataset=dataset, study_ids=study_ids, metric=metric)
    if not pool:
        refuse_mixed_pool(chosen.studies, explicit=study_ids)
    if not with_evidence:
        return chosen, None, {}
    # Imported here, as the renderers are: Optuna loads with the first page that shows tuning, not the API.
    from studies.store.results_tuning import stored_tuning_trials

    evidence = selection_evidence(session, chosen, confidence=confidence)
    tuning_trials = {study.id: stored_tuning_trials(session, study) for study in chosen.studies}
    return chosen, evidence, tuning_trials


def tuning_views(
    chosen: ResultsSelection, tuning_trials: dict[str, list[TuningTrial]], *, confidence: float
) -> list[StudyTuning]:
    """Each chosen study's tuning views, where it has any. Optuna's evaluators run here, on the trials
    read_selection read, with no connection held."""
    from studies.store.results_tuning import tuning_of

    return [
        views
        for study in chosen.studies
        if (views := tuning_of(study, tuning_trials.get(study.id, []), confidence=confidence)) is not None
    ]


def split_ids(values: list[str] | None) -> list[str]:
    """`?study=a&study=b` and `?study=a,b` alike."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]
