"""Builds a results table (one row per method or grid point) from trial records."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from studies.records import COMPLETED_STATUSES, FAILED_STATUSES, TrialRecord, row_label
from studies.stats import (
    ADJUSTMENT_METHODS,
    INSUFFICIENT_DATA,
    REFERENCE,
    Comparison,
    adjust,
    compare_by_seed,
    summarize,
    verdict,
)
from studies.stats.compare import low_n_warning
from studies.stats.summary import check_confidence
from studies.tables.model import PRIMARY_TEST_NOTE, PRIMARY_TEST_NOTE_INTERSECT, ResultsRow
from studies.tables.table import ResultsTable

__all__ = ["DEFAULT_REFERENCE", "PlanKey", "ResultsRow", "ResultsTable", "RowKey", "build_results_table"]

DEFAULT_REFERENCE = "frozen_ln"


@dataclass
class _SeedOutcomes:
    """What the records say about one row, seed by seed."""

    completed: dict[int, float] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    unfinished: set[int] = field(default_factory=set)
    duplicates: set[int] = field(default_factory=set)
    study_ids: set[str] = field(default_factory=set)
    run_ids: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))


# A row: (method, grid point or None).
RowKey = tuple[str, str | None]
# Planned seeds are keyed by row, or by method for every row of that method.
PlanKey = RowKey | str


def build_results_table(
    records: Iterable[TrialRecord],
    *,
    dataset: str,
    metric: str,
    higher_is_better: bool,
    reference: str = DEFAULT_REFERENCE,
    confidence: float = 0.95,
    adjustment: str = "holm",
    planned_seeds: Mapping[PlanKey, Sequence[int]] | None = None,
    paper_values: Mapping[str, float] | None = None,
    on_seed_mismatch: str = "welch",
    dataset_note: str | None = None,
) -> ResultsTable:
    """One row per method (or grid point), each compared with the `reference` row on shared seeds.

    `planned_seeds` is keyed by row, (method, group), or by method for all of its rows; `paper_values`
    by method or by row label ("method [group]"), as a spec writes them.
    `dataset_note` (studies.tables.dataset_notes) heads every rendering when the dataset is a stand-in.
    P-values are adjusted across all comparisons in the table (`adjustment`: holm | bh | none),
    and verdicts use the adjusted p-value at alpha = 1 - confidence.
    """
    confidence = check_confidence(confidence)
    if adjustment not in ADJUSTMENT_METHODS:
        raise ValueError(f"unknown adjustment {adjustment!r}; choose one of {ADJUSTMENT_METHODS}")
    planned_seeds = dict(planned_seeds or {})
    paper_values = dict(paper_values or {})

    outcomes = _collect(records)
    for planned in planned_seeds:
        # A planned row with no records at all still gets a row, so a table shows what never ran.
        if not any(_plans(planned, key) for key in outcomes):
            outcomes[planned if isinstance(planned, tuple) else (planned, None)] = _SeedOutcomes()
    keys = _ordered_keys(list(outcomes), reference, list(planned_seeds))
    reference_key, reference_note = _find_reference(keys, reference)

    drafts: dict[tuple[str, str | None], dict[str, Any]] = {}
    comparisons: dict[tuple[str, str | None], Comparison] = {}
    for key in keys:
        drafts[key] = _describe(key, outcomes[key], planned_seeds, paper_values, confidence)
    for key in keys:
        if key == reference_key:
            continue
        if reference_key is None:
            drafts[key]["warnings"].append(reference_note)
            continue
        comparisons[key] = compare_by_seed(
            dict(drafts[key]["per_seed"]),
            dict(drafts[reference_key]["per_seed"]),
            confidence=confidence,
            higher_is_better=higher_is_better,
            on_mismatch=on_seed_mismatch,
        )

    compared = list(comparisons)
    adjusted = adjust([comparisons[k].p_value for k in compared], adjustment)
    p_adjusted = dict(zip(compared, adjusted, strict=True))
    rows = []
    for key in keys:
        draft = drafts[key]
        comparison = comparisons.get(key)
        if key == reference_key:
            draft.update(is_reference=True, verdict=REFERENCE)
        elif comparison is None:
            draft.update(verdict=INSUFFICIENT_DATA)
        else:
            draft.update(
                diff_mean=comparison.diff_mean,
                diff_ci_low=comparison.diff_ci_low,
                diff_ci_high=comparison.diff_ci_high,
                paired=comparison.paired,
                test=comparison.test,
                p_value=comparison.p_value,
                p_adjusted=p_adjusted[key],
                p_t=comparison.p_t,
                p_wilcoxon=comparison.p_wilcoxon,
                effect_size=comparison.effect_size,
                effect_size_name=comparison.effect_size_name,
                prob_improvement=comparison.prob_improvement,
                mde_80=comparison.mde_80,
                verdict=verdict(
                    comparison.diff_mean,
                    p_adjusted[key],
                    alpha=1.0 - confidence,
                    higher_is_better=higher_is_better,
                ),
            )
            draft["warnings"].extend(comparison.warnings)
        draft["warnings"] = tuple(dict.fromkeys(draft["warnings"]))  # drop repeats, keep order
        rows.append(ResultsRow(**draft))
    return ResultsTable(
        dataset=dataset,
        metric=metric,
        reference=reference,
        higher_is_better=higher_is_better,
        confidence=confidence,
        adjustment=adjustment,
        rows=tuple(rows),
        primary_test=PRIMARY_TEST_NOTE if on_seed_mismatch == "welch" else PRIMARY_TEST_NOTE_INTERSECT,
        dataset_note=dataset_note,
    )


def _collect(records: Iterable[TrialRecord]) -> dict[tuple[str, str | None], _SeedOutcomes]:
    outcomes: dict[tuple[str, str | None], _SeedOutcomes] = defaultdict(_SeedOutcomes)
    for record in records:
        row = outcomes[(record.method, record.group)]
        seed = int(record.seed)
        row.study_ids.add(record.study_id)
        if record.mlflow_run_id:
            row.run_ids[seed].append(record.mlflow_run_id)
        status = record.status.lower()
        value = math.nan if record.value is None else float(record.value)
        if status in COMPLETED_STATUSES and math.isfinite(value):
            if seed in row.completed:
                row.duplicates.add(seed)
            row.completed[seed] = value  # the last completed record for a seed wins
        elif status in COMPLETED_STATUSES or status in FAILED_STATUSES:
            row.failed.add(seed)  # a "succeeded" trial without a finite metric failed in all but name
        else:
            row.unfinished.add(seed)
    return outcomes


def _ordered_keys(keys: list[RowKey], reference: str, planned_order: list[PlanKey]) -> list[RowKey]:
    """Reference first, then the order of `planned_seeds`, then alphabetical."""

    def rank(key: tuple[str, str | None]) -> tuple[int, int, str, str]:
        method, group = key
        is_reference = reference in (method, row_label(method, group))
        planned = [i for i, plan in enumerate(planned_order) if _plans(plan, key)]
        return (0 if is_reference else 1, planned[0] if planned else len(planned_order), method, group or "")

    return sorted(keys, key=rank)


def _find_reference(
    keys: list[tuple[str, str | None]], reference: str
) -> tuple[tuple[str, str | None] | None, str]:
    by_label = [k for k in keys if row_label(*k) == reference]
    if by_label:
        return by_label[0], ""
    by_method = [k for k in keys if k[0] == reference]
    if len(by_method) == 1:
        return by_method[0], ""
    if by_method:
        labels = ", ".join(row_label(*k) for k in by_method)
        return None, f"reference {reference!r} is ambiguous ({labels}): name one row label as the reference"
    return None, f"reference method {reference!r} has no trials in this table: no comparison possible"


def _describe(
    key: tuple[str, str | None],
    seeds: _SeedOutcomes,
    planned_seeds: Mapping[PlanKey, Sequence[int]],
    paper_values: Mapping[str, float],
    confidence: float,
) -> dict[str, Any]:
    """The row's own numbers (no comparison yet) as ResultsRow keyword arguments."""
    method, group = key
    label = row_label(method, group)
    plan = planned_seeds.get(key, planned_seeds.get(method))
    failed = seeds.failed - set(seeds.completed)
    unfinished = seeds.unfinished - set(seeds.completed) - failed
    notes: list[str] = []
    if plan is not None:
        planned = {int(s) for s in plan}
        unfinished |= planned - set(seeds.completed) - failed
        extra = sorted((set(seeds.completed) | failed) - planned)
        if extra:
            notes.append(f"seed(s) {_seed_list(extra)} not in the plan; included anyway")
        n_planned = len(planned)
    else:
        n_planned = len(set(seeds.completed) | failed | unfinished)

    per_seed = tuple(sorted(seeds.completed.items()))
    summary = summarize([v for _, v in per_seed], confidence)
    n = summary.n
    if n == 0:
        notes.append("no completed seeds")
    elif (low_n := low_n_warning(n)) is not None:  # below LOW_N_THRESHOLD
        notes.append(low_n)
    if failed:
        notes.append(f"{len(failed)} of {n_planned} seed(s) failed (seed(s) {_seed_list(sorted(failed))})")
    if unfinished:
        notes.append(f"{len(unfinished)} seed(s) not finished (seed(s) {_seed_list(sorted(unfinished))})")
    if seeds.duplicates:
        notes.append(
            f"seed(s) {_seed_list(sorted(seeds.duplicates))} completed more than once: the last record is used"
        )
    notes.extend(w for w in summary.warnings if not w.startswith(("no values", "one value")))

    paper = paper_values.get(label, paper_values.get(method))
    return {
        "method": method,
        "group": group,
        "is_reference": False,
        "n": n,
        "n_planned": n_planned,
        "n_failed": len(failed),
        "n_unfinished": len(unfinished),
        "per_seed": per_seed,
        "failed_seeds": tuple(sorted(failed)),
        "mean": summary.mean,
        "std": summary.std,
        "sem": summary.sem,
        "ci_low": summary.ci_low,
        "ci_high": summary.ci_high,
        "boot_low": summary.boot_low,
        "boot_high": summary.boot_high,
        "boot_resamples": summary.boot_resamples,
        "median": summary.median,
        "iqm": summary.iqm,
        "diff_mean": None,
        "diff_ci_low": None,
        "diff_ci_high": None,
        "paired": None,
        "test": None,
        "p_value": None,
        "p_adjusted": None,
        "p_t": None,
        "p_wilcoxon": None,
        "effect_size": None,
        "effect_size_name": None,
        "prob_improvement": None,
        "mde_80": None,
        "verdict": INSUFFICIENT_DATA,
        "warnings": notes,
        "study_ids": tuple(sorted(seeds.study_ids)),
        "mlflow_run_ids": tuple(dict.fromkeys(r for _, runs in sorted(seeds.run_ids.items()) for r in runs)),
        "paper_value": None if paper is None else float(paper),
    }


def _plans(plan: PlanKey, key: RowKey) -> bool:
    """Whether a planned_seeds key covers the row: the row itself, or its method."""
    return plan == key if isinstance(plan, tuple) else plan == key[0]


def _seed_list(seeds: Sequence[int]) -> str:
    return ", ".join(str(s) for s in seeds)
