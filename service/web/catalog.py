"""The catalog page's data: every claim of studies.catalog with its latest verdict at each size (tier).

scripts/run_catalog.py runs a tier against a server and leaves, per claim, the study's report as
`<claim>.json` (with `.md` and `.html`) in the tier's folder of the reports folder: `reports/` for cpu,
`reports/smoke/` for smoke (its docstring), `reports/paper/` for the paper size. The latest verdict of a
claim at a tier is the one in that file; where there is none the claim was not run at that tier, or the
catalog has no study for it at that size (the claim's `no_spec` says why). A report whose recorded
fingerprint (studies.catalog.fingerprint: the check code, the claim's catalog entry and its spec) differs
from this tree's, or which recorded none, is stale: its verdict is shown with the mark and the reason, as
the index (reports/README.md) marks it. Nothing here imports FastAPI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studies.catalog import PAPERS, claim_ids, get_claim, spec_path, study_claim
from studies.catalog.fingerprint import check_code_hash, claim_fingerprint, staleness

__all__ = [
    "DEFAULT_REPORTS_DIR",
    "NOT_RUN",
    "NO_STUDY",
    "PIPELINE_TIER",
    "SHOWN_TIERS",
    "TIER_FOLDERS",
    "ClaimVerdicts",
    "TierVerdict",
    "catalog_verdicts",
    "stored_report",
]

# The source tree's reports/, where scripts/run_catalog.py writes by default. An installed package has no
# source tree: there NORMLAB_CATALOG_REPORTS_DIR names the folder (the Docker image sets it), and without
# one every claim reads "not run".
DEFAULT_REPORTS_DIR = Path(__file__).resolve().parents[2] / "reports"
TIER_FOLDERS: dict[str, str] = {"smoke": "smoke", "cpu": ".", "paper": "paper"}
NOT_RUN = "not run"
NO_STUDY = "no study"
# The size whose reports check the pipeline only: too small to carry any scientific weight, so its
# verdicts are shown as pipeline checks, never as verdicts.
PIPELINE_TIER = "smoke"
# The sizes whose verdicts count, the one that counts most first (the papers' own sizes, then cpu).
COUNTING_TIERS: tuple[str, ...] = ("paper", "cpu")
# The columns in the order a reader needs them: the sizes that count, then the pipeline check.
SHOWN_TIERS: tuple[str, ...] = ("cpu", "paper", PIPELINE_TIER)


@dataclass(frozen=True)
class TierVerdict:
    tier: str  # smoke | cpu | paper (studies.catalog.SIZES)
    verdict: str  # the report's (supported, contradicted, inconclusive, not tested), NOT_RUN or NO_STUDY
    reason: str | None  # why not tested, or why the catalog has no study at this size
    study_id: str | None  # the study the report judged (on the server that ran the tier)
    generated_at: str | None  # when the report was written (ISO 8601)
    report_url: str | None  # the stored HTML report, served by the catalog page's route
    stale: str | None = None  # why the report is stale against this tree (fingerprint); None: current
    # The dataset the study ran on where it is not the claim's own (a stand-in: digits for cifar10), so
    # a verdict never reads as one on the paper's dataset; None where it ran on the claim's dataset.
    ran_on: str | None = None

    @property
    def has_report(self) -> bool:
        return self.verdict not in (NOT_RUN, NO_STUDY)

    @property
    def is_pipeline_check(self) -> bool:
        """A report of the pipeline-check size: it says the pipeline ran, not what the claim is."""
        return self.tier == PIPELINE_TIER and self.has_report

    @property
    def badge(self) -> str:
        """The verdict as its badge reads: with the stand-in it was reached on, e.g. "contradicted on
        digits_c (stand-in)"; a pipeline check's reads as one."""
        if self.is_pipeline_check:
            return "pipeline check: ran"
        return f"{self.verdict} on {self.ran_on} (stand-in)" if self.ran_on else self.verdict

    @property
    def title(self) -> str | None:
        """The badge's hover text: why not tested, or what a pipeline check's report said and why it
        does not count."""
        if self.is_pipeline_check:
            return f"{PIPELINE_TIER} size, no scientific weight: its report said {self.verdict}"
        return self.reason

    @property
    def css(self) -> str:
        """The verdict's colour class, as the report pages name them (`not tested` -> `not-tested`)."""
        if self.is_pipeline_check:
            return "pipeline"
        return {NOT_RUN: "none", NO_STUDY: "not-tested"}.get(self.verdict, self.verdict.replace(" ", "-"))


@dataclass(frozen=True)
class ClaimVerdicts:
    id: str
    title: str
    paper: str
    statement: str
    shares_study_with: str | None
    verdicts: tuple[TierVerdict, ...]  # in SHOWN_TIERS order

    @property
    def counting(self) -> TierVerdict | None:
        """The verdict that counts: the largest size with a report (paper, then cpu); never a pipeline
        check. None where no counting size has one."""
        by_tier = {v.tier: v for v in self.verdicts}
        return next((by_tier[t] for t in COUNTING_TIERS if t in by_tier and by_tier[t].has_report), None)


def catalog_verdicts(reports_dir: Path) -> list[ClaimVerdicts]:
    """Every catalog claim, in catalog order, with its verdict at every tier."""
    check_code = check_code_hash()  # once per page: every claim's fingerprint shares it
    rows = []
    for claim_id in claim_ids():
        claim = get_claim(claim_id)
        rows.append(
            ClaimVerdicts(
                id=claim_id,
                title=claim.title,
                paper=PAPERS[claim.paper],
                statement=claim.statement,
                shares_study_with=claim.shares_study_with,
                verdicts=tuple(
                    _tier_verdict(reports_dir, claim_id, tier, check_code) for tier in SHOWN_TIERS
                ),
            )
        )
    return rows


def stored_report(reports_dir: Path, tier: str, claim_id: str, fmt: str) -> Path | None:
    """The report file run_catalog.py left for the claim at the tier, or None. Only known tiers and
    claims are looked up, so no request can name a path of its own choosing."""
    if tier not in TIER_FOLDERS or claim_id not in claim_ids() or fmt not in ("html", "json", "md"):
        return None
    path = reports_dir / TIER_FOLDERS[tier] / f"{claim_id}.{fmt}"
    return path if path.is_file() else None


def _tier_verdict(reports_dir: Path, claim_id: str, tier: str, check_code: str) -> TierVerdict:
    if not spec_path(claim_id, tier).exists():
        # as in the index: a report left from before the catalog dropped the study is no verdict of it
        reason = get_claim(study_claim(claim_id, tier)).no_spec.get(tier) or f"no {tier} study in the catalog"
        return TierVerdict(tier, NO_STUDY, reason, None, None, None)
    stored = stored_report(reports_dir, tier, claim_id, "json")
    report = _read(stored) if stored is not None else None
    if report is None:
        return TierVerdict(tier, NOT_RUN, None, None, None, None)
    result = report.get("result") or {}
    provenance = report.get("provenance") or {}
    html = stored_report(reports_dir, tier, claim_id, "html")
    current = claim_fingerprint(claim_id, spec_path(claim_id, tier), check_code=check_code)
    return TierVerdict(
        tier=tier,
        verdict=str(report.get("verdict") or "–"),
        reason=result.get("reason") if isinstance(result, dict) else None,
        study_id=report.get("study_id"),
        generated_at=provenance.get("generated_at") if isinstance(provenance, dict) else None,
        report_url=f"/catalog/reports/{tier}/{claim_id}" if html is not None else None,
        stale=staleness(provenance.get("fingerprint") if isinstance(provenance, dict) else None, current),
        ran_on=_ran_on(report, get_claim(claim_id).dataset),
    )


def _ran_on(report: dict[str, Any], claim_dataset: str | None) -> str | None:
    dataset = report.get("dataset")
    if not isinstance(dataset, str) or not dataset or dataset == claim_dataset:
        return None
    return dataset


def _read(path: Path) -> dict[str, Any] | None:
    """The stored report, or None where it cannot be read (a half-written or hand-edited file must not
    take the page down)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
