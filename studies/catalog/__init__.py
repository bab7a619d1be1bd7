"""The reproduction catalog: every claim of both papers as a study in three sizes.

    studies/catalog/claims.yaml          the claims: statement, what the paper reports, the check, the
                                         sources of its numbers
    studies/catalog/convergence.yaml     per dataset, the level the reference must reach first
    studies/catalog/<claim id>/smoke.yaml a pipeline check: minutes on 2 CPU cores, no scientific weight
    studies/catalog/<claim id>/cpu.yaml   the smallest setting on offline data where the reference converges
    studies/catalog/<claim id>/paper.yaml the paper's sizes and datasets, for a GPU cluster

Every spec names its claim (`claim: <id>`), so a study's report can say, claim by claim, what was
measured against what the paper says. Claims that need the same experiment share one study (the claim
says `shares_study_with`), and a claim with no study at a size says why (`no_spec`). This package
imports neither torch nor FastAPI.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from studies.catalog.claims import (
    CLAIMS_FILE,
    PAPERS,
    Claim,
    Reported,
    Requirements,
    Source,
    claim_ids,
    load_claims,
)
from studies.catalog.convergence import CONVERGENCE_FILE, convergence_for, convergence_levels
from studies.catalog.datasets import (
    STAND_IN_FOR,
    DatasetComparability,
    dataset_comparability,
    unclaimed_comparability,
)

if TYPE_CHECKING:
    from studies.spec import StudySpec

__all__ = [
    "CATALOG_DIR",
    "CLAIMS_FILE",
    "CONVERGENCE_FILE",
    "PAPERS",
    "SIZES",
    "STAND_IN_FOR",
    "Claim",
    "DatasetComparability",
    "Reported",
    "Requirements",
    "Source",
    "UnknownClaimError",
    "claim_ids",
    "claims_reading",
    "convergence_for",
    "convergence_levels",
    "dataset_comparability",
    "get_claim",
    "load_catalog_spec",
    "load_claims",
    "spec_path",
    "study_claim",
    "unclaimed_comparability",
]

CATALOG_DIR = Path(__file__).resolve().parent
SIZES: tuple[str, ...] = ("smoke", "cpu", "paper")


class UnknownClaimError(KeyError):
    """A claim id the catalog does not hold."""

    def __str__(self) -> str:  # KeyError would print the repr of its argument
        return str(self.args[0])


def get_claim(claim_id: str) -> Claim:
    claims = load_claims()
    if claim_id not in claims:
        raise UnknownClaimError(f"unknown claim '{claim_id}'; catalog claims: {', '.join(claims)}")
    return claims[claim_id]


def study_claim(claim_id: str, size: str | None = None) -> str:
    """The claim whose specs run this claim's study (at `size`; None: at every size): itself, or the claim
    it shares a study with."""
    claim = get_claim(claim_id)
    if claim.shares_study_with is not None:
        return claim.shares_study_with
    if size is not None and size in claim.shares_study_at:
        return claim.shares_study_at[size]  # type: ignore[index]  # a size the model validated
    return claim_id


def spec_path(claim_id: str, size: str) -> Path:
    """studies/catalog/<claim id>/<size>.yaml of the claim's study at `size` (its own, or the one it
    shares); the file may be absent where the claim says why in `no_spec`."""
    if size not in SIZES:
        raise ValueError(f"unknown size '{size}'; choose one of {', '.join(SIZES)}")
    return CATALOG_DIR / study_claim(claim_id, size) / f"{size}.yaml"


def claims_reading(host: str, size: str | None = None) -> list[str]:
    """Every claim that reads `host`'s study (at `size`; None: at every size), the host first."""
    return [host, *(c for c in claim_ids() if c != host and study_claim(c, size) == host)]


def load_catalog_spec(claim_id: str, size: str) -> StudySpec:
    """The validated StudySpec of a claim at a size."""
    from studies.spec import load_spec  # studies.spec validates `claim` against this catalog

    return load_spec(spec_path(claim_id, size))
