"""The results table's data: one ResultsRow per method (or grid point) and the table around them.

Plain frozen dataclasses with no rendering, so the renderers (render_*.py, columns.py) import them
without importing the builder; `studies.tables.table.ResultsTable` adds a method per rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from studies.records import row_label
from studies.stats.summary import DEFAULT_BOOTSTRAP_RESAMPLES

if TYPE_CHECKING:
    from studies.tables.sequential import SequentialSummary

__all__ = [
    "PRIMARY_TEST_NOTE",
    "PRIMARY_TEST_NOTE_INTERSECT",
    "ResultsRow",
    "ResultsTableData",
    "StudyCompletenessNote",
]

PRIMARY_TEST_NOTE = (
    "primary test: paired t-test on shared seeds (Wilcoxon signed-rank beside it); "
    "Welch t-test when seed sets differ"
)
PRIMARY_TEST_NOTE_INTERSECT = (
    "primary test: paired t-test on shared seeds (Wilcoxon signed-rank beside it); "
    "when seed sets differ, paired on the seeds both completed"
)


@dataclass(frozen=True)
class ResultsRow:
    """One method (or grid point) of a results table. Floats are None, never NaN, when undefined."""

    method: str
    group: str | None
    is_reference: bool
    n: int  # completed seeds
    n_planned: int
    n_failed: int
    n_unfinished: int  # planned or started but neither completed nor failed (running, cancelled, not run)
    per_seed: tuple[tuple[int, float], ...]  # (seed, value) of completed seeds, by seed
    failed_seeds: tuple[int, ...]
    mean: float | None
    std: float | None
    sem: float | None
    ci_low: float | None  # t interval of the mean
    ci_high: float | None
    boot_low: float | None  # BCa bootstrap interval of the mean
    boot_high: float | None
    boot_resamples: int
    median: float | None
    iqm: float | None
    diff_mean: float | None  # this row minus the reference, metric units
    diff_ci_low: float | None
    diff_ci_high: float | None
    paired: bool | None  # None for the reference row and rows without a comparison
    test: str | None  # primary test used
    p_value: float | None  # raw p of the primary test
    p_adjusted: float | None  # adjusted across the table's comparisons
    p_t: float | None
    p_wilcoxon: float | None
    effect_size: float | None
    effect_size_name: str | None
    prob_improvement: float | None
    mde_80: float | None
    verdict: str
    warnings: tuple[str, ...]
    study_ids: tuple[str, ...]
    mlflow_run_ids: tuple[str, ...]
    paper_value: float | None

    @property
    def label(self) -> str:
        return row_label(self.method, self.group)


@dataclass(frozen=True)
class StudyCompletenessNote:
    """What a table says of one study's completeness (studies.store.completeness decides it): whether it
    holds every trial it planned, and why in words (the missing trials by name)."""

    study_id: str
    name: str
    complete: bool
    reason: str
    shown: bool = True  # False: a newer incomplete study the table passed over for a complete one


@dataclass(frozen=True)
class ResultsTableData:
    """A results table for one dataset and metric (its renderings: studies.tables.table.ResultsTable)."""

    dataset: str
    metric: str
    reference: str
    higher_is_better: bool
    confidence: float
    adjustment: str
    rows: tuple[ResultsRow, ...]
    bootstrap_resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES
    primary_test: str = field(default=PRIMARY_TEST_NOTE)
    # "stand-in for <paper dataset>: <what it is>" when the dataset is not the paper's own (dataset_notes).
    dataset_note: str | None = None
    # Study id -> summary of each sequential study the table covers (studies.tables.sequential); its
    # comparisons show the repeated interval and stage-wise p of the study's looks (studies.store.results).
    sequential: Mapping[str, SequentialSummary] = field(default_factory=dict, hash=False)
    # Whether each study the table shows (and each newer one it passed over) holds every trial it planned,
    # where the table was built from the store (studies.store.results); empty: not said.
    completeness: tuple[StudyCompletenessNote, ...] = ()

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def has_paper_values(self) -> bool:
        return any(row.paper_value is not None for row in self.rows)
