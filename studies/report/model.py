"""A study report's data: what the renderers (render.py, render_html.py) read. Apart from build.py, which
makes reports and gives them their `to_*` methods, so that no renderer imports the builder."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from studies.catalog import Claim, DatasetComparability
    from studies.claims.preconditions import PreconditionResult
    from studies.claims.verdicts import CheckResult
    from studies.evidence.mechanism import MechanismSummary
    from studies.report.judge import PowerRow, SensitivityRow
    from studies.tables.model import ResultsTableData
    from studies.tuning import StudyTuning

__all__ = ["SCOPES", "Figure", "PaperComparison", "PreregisteredValue", "Provenance", "StudyReportData"]

# What a verdict is about: the paper's own data, an offline stand-in (a verdict about the stand-in,
# tallied apart), or initialisation, where no dataset-specific number exists.
SCOPES = ("paper data", "stand-in", "init")


class Figure(Protocol):
    """A figure the report shows: studies.tables.render_evidence_svg.EvidenceFigure has this shape.
    Read-only members, so a frozen dataclass matches."""

    @property
    def name(self) -> str: ...
    @property
    def caption(self) -> str: ...
    @property
    def svg(self) -> str: ...


@dataclass(frozen=True)
class PaperComparison:
    """One number the paper reports, next to the same quantity as measured (mean over seeds)."""

    row: str  # the row the number belongs to (a method, or "method [grid point]")
    metric: str
    paper: float
    measured: float | None
    ci_low: float | None  # t interval of the measured mean
    ci_high: float | None
    n: int  # completed seeds behind the measured mean
    comparable: bool  # False when the study ran on other data than the paper's number comes from


@dataclass(frozen=True)
class PreregisteredValue:
    """A number the check or the spec relies on, fixed before the result, and where it comes from."""

    name: str  # "margin", "eps_h", "convergence level (digits)"
    value: str
    source: str


@dataclass(frozen=True)
class Provenance:
    """Where the numbers come from: the study, its spec and seeds, and the software that made the report."""

    study_id: str
    study_name: str
    status: str
    spec: Mapping[str, Any]
    seeds: tuple[int, ...]
    tune_seeds: tuple[int, ...]
    split_seed: int
    normlab_version: str
    git_revision: str
    packages: Mapping[str, str]
    generated_at: str  # ISO 8601, UTC
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    mlflow_experiment_id: str | None = None
    mlflow_experiment_url: str | None = None  # the experiment in the MLflow UI (its training view)
    ray_job_id: str | None = None
    # Each plugin the study ran: "<path> sha256 <hash> (package <name>)"; its files are in `spec`.
    plugins: tuple[str, ...] = ()


@dataclass(frozen=True)
class StudyReportData:
    """Everything a study's report shows (data only: the renderers depend on this, not on
    studies.report.build)."""

    study_id: str
    study_name: str
    kind: str
    metric: str  # the metric the comparison table and paper numbers use
    dataset: DatasetComparability
    dataset_note: str | None  # a stand-in's note (studies.datasets.DATASET_NOTES); None for the paper's data
    claim: Claim | None
    result: CheckResult | None  # the claim check's verdict; None without a claim
    paper_vs_measured: tuple[PaperComparison, ...]
    table: ResultsTableData | None  # the comparison of every row with the reference, over seeds
    figures: tuple[Figure, ...]
    provenance: Provenance
    notes: tuple[str, ...] = field(default_factory=tuple)
    scope: str = "paper data"  # one of SCOPES
    preconditions: tuple[PreconditionResult, ...] = ()
    preregistered: tuple[PreregisteredValue, ...] = ()
    sensitivity: tuple[SensitivityRow, ...] = ()
    power: tuple[PowerRow, ...] = ()
    # AutoNorm's gates, seed by seed (whether and when the freeze fired, entropy, selector gradient
    # variance); None for a study without gated methods.
    mechanism: MechanismSummary | None = None
    # Knob importance and optimisation history of its tune trials (a sweep: importance and the response to
    # each knob); None for a study that neither tunes nor sweeps.
    tuning: StudyTuning | None = None

    @property
    def verdict(self) -> str | None:
        return None if self.result is None else self.result.verdict
