"""The comparisons of sequential studies in a results table: a study that added seeds look by look until a
comparison was decided must not be read through a fixed-n test, whose interval and p-value ignore that the
seeds stopped when the data looked decided.

`sequential_table` takes the table studies.tables builds from the trials and, for every comparison that
involves trials of a sequential study:

- when the row and the reference are that study's own arms, on the primary metric its looks tested, and
  the reference is the study's: Δ, its interval and p become the study's outcome (the mean paired
  difference at the comparison's last look, the repeated confidence interval, the stage-wise p-value),
  and the verdict its decision;
- otherwise (a pooled table, another metric, another reference) nothing valid is known: the comparison's
  interval, tests and verdict are left out, saying why.

Comparisons of fixed-seed studies keep their tests; their p-values are adjusted again over those left,
and a table that covers no sequential study comes back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from studies.datasets import DATASET_METRICS
from studies.stats import BETTER, INSUFFICIENT_DATA, NO_SIGNIFICANT_DIFFERENCE, WORSE, adjust, verdict
from studies.store._looks import sequential_summary
from studies.tables import ResultsRow, ResultsTable
from studies.tables.sequential import (
    EQUIVALENCE_NOT_SHOWN,
    EQUIVALENT,
    NON_INFERIOR,
    NON_INFERIORITY_NOT_SHOWN,
    NOT_EQUIVALENT,
    NOT_TESTED,
    OPEN,
    in_metric_units,
)

if TYPE_CHECKING:
    from studies.sequential import LookRecord
    from studies.spec import StudySpec
    from studies.store.views import StudyView
    from studies.tables.sequential import SequentialOutcome, SequentialSummary

__all__ = ["sequential_summaries", "sequential_table"]

# A comparison's verdict from its decision: shown (or refuted) by the looks ...
_SHOWN = {"non_inferior": NON_INFERIOR, "equivalent": EQUIVALENT, "not_equivalent": NOT_EQUIVALENT}
# ... or stopped without showing its goal (futility, or undecided at the maximum seeds), by the design's test.
_NOT_SHOWN = {
    "superiority": NO_SIGNIFICANT_DIFFERENCE,
    "non_inferiority": NON_INFERIORITY_NOT_SHOWN,
    "equivalence": EQUIVALENCE_NOT_SHOWN,
}
# Row fields that only a fixed-n comparison defines, left out of every comparison replaced here.
_NO_FIXED_N: dict[str, Any] = dict.fromkeys(
    ("p_adjusted", "p_t", "p_wilcoxon", "effect_size", "effect_size_name", "prob_improvement", "mde_80")
)


def sequential_summaries(
    studies: Sequence[StudyView], specs: Sequence[StudySpec], looks: Mapping[str, Sequence[LookRecord]]
) -> dict[str, SequentialSummary]:
    """Study id -> summary of each sequential study among `studies` (their specs alongside), from its
    stored `looks`, on its dataset's primary metric (the one its looks test)."""
    summaries: dict[str, SequentialSummary] = {}
    for study, spec in zip(studies, specs, strict=True):
        summary = sequential_summary(
            spec, list(looks.get(study.id, ())), higher_is_better=DATASET_METRICS[study.dataset][1]
        )
        if summary is not None:
            summaries[study.id] = summary
    return summaries


def sequential_table(
    table: ResultsTable, summaries: Mapping[str, SequentialSummary], *, primary_metric: bool
) -> ResultsTable:
    """`table` with every comparison that involves a sequential study's trials replaced (see the module
    docstring) and the summaries attached; `primary_metric`: the table compares the dataset's primary
    metric, the one the looks tested. Without summaries, `table` itself."""
    if not summaries:
        return table
    reference = next((row for row in table.rows if row.is_reference), None)
    rows = list(table.rows)
    changed = False
    for i, row in enumerate(rows):
        if reference is None or row.is_reference or not row.study_ids:
            continue  # no comparison: no reference, or an arm without trials (insufficient data already)
        involved = sorted((set(row.study_ids) | set(reference.study_ids)) & set(summaries))
        if not involved:
            continue
        why_not = _why_not_sequential(row, reference, involved, summaries, primary_metric=primary_metric)
        if why_not is None:
            rows[i] = _sequential_row(row, involved[0], summaries[involved[0]])
        else:
            rows[i] = _not_tested_row(row, why_not)
        changed = True
    if changed:
        rows = _readjusted(rows, table)
    return replace(table, rows=tuple(rows), sequential=dict(summaries))


def _why_not_sequential(
    row: ResultsRow,
    reference: ResultsRow,
    involved: list[str],
    summaries: Mapping[str, SequentialSummary],
    *,
    primary_metric: bool,
) -> str | None:
    """Why the comparison cannot show its study's sequential outcome; None when it can."""
    study = involved[0]
    summary = summaries[study]
    if len(involved) > 1 or set(row.study_ids) != {study} or set(reference.study_ids) != {study}:
        return (
            f"not tested: this table pools the seeds of sequential study {', '.join(involved)} with other "
            "studies', and a fixed-n test would ignore the looks that chose them; ask for "
            f"?study={study} alone for its repeated intervals"
        )
    if not primary_metric:
        return (
            f"not tested: the looks of sequential study {study} tested the dataset's primary metric, and a "
            "fixed-n test of this metric on the seeds they chose would ignore them"
        )
    if summary["reference"] is None:
        return (
            f"not tested: sequential study {study} is a grid whose looks compare the pairs of points its "
            "design names (its sequential section), and a fixed-n test against the reference on the seeds "
            "its looks chose would ignore them"
        )
    if reference.method != summary["reference"] or reference.group is not None or row.group is not None:
        return (
            f"not tested: sequential study {study} compares with {summary['reference']}, and a fixed-n test "
            f"against {reference.label} on the seeds its looks chose would ignore them"
        )
    if _outcome(summary, row.method) is None:
        return f"not tested: sequential study {study} has no comparison of {row.method}"
    return None


def _outcome(summary: SequentialSummary, method: str) -> SequentialOutcome | None:
    return next((o for o in summary["outcomes"] if o["method"] == method), None)


def _sequential_row(row: ResultsRow, study: str, summary: SequentialSummary) -> ResultsRow:
    """The row with its study's outcome as its comparison, in the metric's units (method - reference)."""
    outcome = _outcome(summary, row.method)
    assert outcome is not None, "_why_not_sequential checked the outcome exists"
    estimate, low, high = in_metric_units(outcome, higher_is_better=summary["higher_is_better"])
    level = outcome["interval_level"]
    return replace(
        row,
        diff_mean=estimate,
        diff_ci_low=low,
        diff_ci_high=high,
        paired=True,
        test="group-sequential: no look yet"
        if level is None
        else f"group-sequential: {level * 100:g} % repeated CI, stage-wise p",
        p_value=outcome["p_value"],
        verdict=_sequential_verdict(outcome, summary),
        warnings=(_outcome_note(study, outcome, summary), *_own_warnings(row)),
        **_NO_FIXED_N,
    )


def _sequential_verdict(outcome: SequentialOutcome, summary: SequentialSummary) -> str:
    decision = outcome["decision"]
    if decision == "efficacy":
        return BETTER if (outcome["estimate"] or 0.0) > 0.0 else WORSE
    if decision in _SHOWN:
        return _SHOWN[decision]
    if decision == "open":
        return OPEN
    if decision == "too_few_seeds":
        return INSUFFICIENT_DATA
    return _NOT_SHOWN.get(str(summary["design"].get("test")), NO_SIGNIFICANT_DIFFERENCE)


def _outcome_note(study: str, outcome: SequentialOutcome, summary: SequentialSummary) -> str:
    """Where the comparison stands and what its numbers are, in one note."""
    where = (
        f"at look {outcome['stopped_at_look']}"
        if outcome["stopped_at_look"] is not None
        else f"after look {outcome['look']}"
        if outcome["look"] is not None
        else "before its first look"
    )
    numbers = (
        f"; Δ is the mean paired difference of its {outcome['seeds']} paired seeds at look {outcome['look']}, "
        "its interval the repeated confidence interval (valid over every look) and p the stage-wise "
        f"p-value, both at the level it was tested at ({outcome['tested_at_level']:g})"
        + ("" if outcome["stopped_at_look"] is not None else " (given once it stops)")
        if outcome["look"] is not None
        else ""
    )
    return f"sequential study {study}: {outcome['decision_text']} {where}{numbers}"


def _own_warnings(row: ResultsRow) -> tuple[str, ...]:
    # Arms that stop at different looks have different seed sets by design: the looks paired them.
    return tuple(w for w in row.warnings if not w.startswith("seed sets differ"))


def _not_tested_row(row: ResultsRow, why: str) -> ResultsRow:
    return replace(
        row,
        diff_ci_low=None,
        diff_ci_high=None,
        paired=None,
        test=None,
        p_value=None,
        verdict=NOT_TESTED,
        warnings=(why, *row.warnings),
        **_NO_FIXED_N,
    )


def _readjusted(rows: list[ResultsRow], table: ResultsTable) -> list[ResultsRow]:
    """The fixed-n comparisons left, adjusted over themselves alone, with their verdicts again."""
    fixed = [i for i, row in enumerate(rows) if row.p_adjusted is not None]
    adjusted = adjust([rows[i].p_value for i in fixed], table.adjustment)
    for i, p in zip(fixed, adjusted, strict=True):
        rows[i] = replace(
            rows[i],
            p_adjusted=p,
            verdict=verdict(rows[i].diff_mean, p, alpha=table.alpha, higher_is_better=table.higher_is_better),
        )
    return rows
