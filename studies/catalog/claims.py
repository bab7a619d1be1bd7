"""The claim model: what a paper says, what it reports, and the check that tests it on a study."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from studies.claims import Check

__all__ = ["PAPERS", "Claim", "Reported", "Requirements", "Source"]

PAPERS: dict[str, str] = {
    "autonorm": "AutoNorm: Understanding Adaptive Normalization in Transformers through Differentiable Gating",
    "transforming_rank": "Transforming Rank: How Architecture Navigates the Spectral Pathologies of Depth "
    "(K. Everett)",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Reported(_Strict):
    """What the paper reports for the claim, in the check's units (accuracy as a fraction: 0.8635)."""

    text: str = Field(min_length=1)  # the paper's numbers in words, as the source summaries give them
    # The paper's number per row the check compares (method, "method [group]", or an activation for
    # width thresholds); empty for qualitative claims.
    values: dict[str, float] = Field(default_factory=dict)
    metric: str | None = None  # what `values` measure, e.g. "test accuracy"
    significance: str | None = None  # as the paper states it, e.g. "p < 0.05"


class Source(_Strict):
    """Where a number a check or spec relies on comes from: the paper (quoted), or NormLab (and why)."""

    origin: Literal["paper", "normlab"]
    text: str = Field(min_length=1)  # the paper's words, or NormLab's reason for its choice

    def __str__(self) -> str:
        who = "the paper" if self.origin == "paper" else "NormLab's choice"
        return f"{who}: {self.text}"


class Requirements(_Strict):
    """What a dataset must offer for a study on it to test the claim at all."""

    classes: int | None = Field(None, ge=2)  # e.g. 100 for a CIFAR-100 claim: a 10-class set cannot test it
    # The claim is about what happens after AutoNorm-S's freeze: every autonorm_s trial must have frozen,
    # or the study never exercised it (a comparison of post-freeze gates that never froze is vacuous).
    freeze_fired: bool = False


class Claim(_Strict):
    """One claim of one paper, with the check that tests it and the specs that run it."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$", max_length=80)
    paper: Literal["autonorm", "transforming_rank"]
    title: str = Field(min_length=1, max_length=160)
    statement: str = Field(min_length=1)
    # The dataset the paper's numbers come from; None for claims about initialisation that hold on any
    # input (the rank claims), where there is nothing dataset-specific to compare.
    dataset: str | None = None
    reported: Reported
    check: Check
    notes: str | None = None  # choices the paper leaves open (margins, levels), made and stated here
    # "trained": the check reads trained metrics, so the reference must converge first (the dataset's
    # level in studies/catalog/convergence.yaml); "init": only init-time measurements, nothing to converge.
    measured_at: Literal["trained", "init"] = "trained"
    requires: Requirements = Field(default_factory=Requirements)
    # Another claim whose study this claim reads (the same experiment, counted once): this claim has no
    # specs of its own, and its check runs on that claim's study at every size.
    shares_study_with: str | None = None
    # At these sizes only (size -> claim), this claim reads another claim's study: the same training serves
    # both there (one digits recipe for several vision claims), while at the other sizes each claim has its
    # own dataset and spec. The claim has no spec of its own at those sizes.
    shares_study_at: dict[Literal["smoke", "cpu", "paper"], str] = Field(default_factory=dict)
    # Every margin, threshold, level and knob value the check or the specs rely on -> its source, printed
    # in the report before the result (a catalog test requires one for each of the check's numbers).
    sources: dict[str, Source] = Field(default_factory=dict)
    # A free choice the verdict may rest on -> the values to show the verdict across (a check parameter
    # such as margin, or a knob the study's grid sweeps, such as init_scale).
    sensitivity: dict[str, list[float]] = Field(default_factory=dict)
    # Sizes (smoke, cpu, paper) this claim has no study at, and why: e.g. "no offline 100-class dataset".
    # The index lists the claim there as not tested, with this reason.
    no_spec: dict[str, str] = Field(default_factory=dict)


# The catalog's claims file. Reading it needs neither studies.spec nor the catalog's specs, so the spec
# validator can check a study's `claim` against it without an import cycle.
CLAIMS_FILE = Path(__file__).resolve().parent / "claims.yaml"


@cache
def load_claims() -> dict[str, Claim]:
    """Every claim of the catalog by id, in file order (validated; read once per process)."""
    raw = yaml.safe_load(CLAIMS_FILE.read_text(encoding="utf-8"))
    entries = raw.get("claims") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{CLAIMS_FILE} must hold a mapping with a `claims:` list")
    claims: dict[str, Claim] = {}
    for entry in entries:
        claim = Claim.model_validate(entry)
        if claim.id in claims:
            raise ValueError(f"{CLAIMS_FILE}: claim id '{claim.id}' appears twice")
        claims[claim.id] = claim
    for claim in claims.values():
        hosts = [claim.shares_study_with] if claim.shares_study_with is not None else []
        hosts += list(claim.shares_study_at.values())
        for host in hosts:
            if (
                host not in claims
                or claims[host].shares_study_with is not None
                or claims[host].shares_study_at
            ):
                raise ValueError(
                    f"{CLAIMS_FILE}: claim '{claim.id}' shares the study of '{host}', which must be a claim "
                    "with specs of its own"
                )
        if claim.shares_study_with is not None and claim.shares_study_at:
            raise ValueError(
                f"{CLAIMS_FILE}: claim '{claim.id}' shares a study at every size (shares_study_with) and at "
                "some sizes (shares_study_at): keep one"
            )
    return claims


def claim_ids() -> tuple[str, ...]:
    return tuple(load_claims())
