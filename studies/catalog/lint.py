"""Rules a catalog claim and its specs must pass before any of them is run: the study can answer the
claim, its check can fail and can pass, every number has a source, and one experiment is run once.

Each rule returns the problems it finds as sentences (empty: the rule holds), so the catalog test can
fail with the reason and a unit test can show the rule firing on a bad example.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

from studies.catalog.claims import Claim
from studies.catalog.datasets import DATASET_CLASSES
from studies.catalog.sources import check_numbers, source_for
from studies.claims.preconditions import freezing_rows
from studies.knobs import DEFAULT_EPS_H, KNOBS
from studies.methods import FREEZING_METHODS
from studies.spec import DATASET_METRICS, StudySpec
from studies.spec.distributions import Choice, Fixed, Grid, IntRange, LogUniform, Uniform, _discrete_values
from studies.spec.names import _DATASET_FAMILY
from studies.spec.rules import _largest_int

__all__ = [
    "STUDY_IDENTITY_FIELDS",
    "duplicate_studies",
    "expressibility_problem",
    "freeze_problems",
    "freeze_rule_problems",
    "grid_problems",
    "source_problems",
    "tuning_problems",
    "vacuous_check_problems",
]

# Gates start at exactly (0.5, 0.5): a collapse threshold at or above this level is met by any drift.
GATE_START = 0.5
# Spec fields that only name or describe a study: two specs equal in everything else run one experiment.
STUDY_IDENTITY_FIELDS = ("name", "claim", "description")


def expressibility_problem(claim: Claim, dataset: str) -> str | None:
    """Why a study on `dataset` cannot test the claim at all (None when it can): another kind of data or
    metric than the claim's, or too few classes (a 100-class claim on a 10-class set)."""
    needed = claim.requires.classes
    if needed is not None:
        classes = DATASET_CLASSES.get(dataset)
        if classes is None or classes < needed:
            have = "an unknown number of" if classes is None else str(classes)
            return (
                f"{dataset} has {have} classes; the claim is about {needed}: this dataset cannot express it"
            )
    paper = claim.dataset
    if paper is None or paper == dataset or paper not in _DATASET_FAMILY:
        return None
    if _DATASET_FAMILY[paper] != _DATASET_FAMILY.get(dataset):
        return f"{dataset} is {_DATASET_FAMILY.get(dataset)} data; the claim is about {_DATASET_FAMILY[paper]} data"
    if DATASET_METRICS[paper][0] != DATASET_METRICS[dataset][0]:
        return (
            f"{dataset} is measured in {DATASET_METRICS[dataset][0]}; the claim is about "
            f"{DATASET_METRICS[paper][0]}"
        )
    return None


def vacuous_check_problems(claim: Claim) -> list[str]:
    """Checks whose pass condition is implied by the setup, so they cannot fail."""
    check = claim.check
    problems = []
    if check.type == "gate_pattern":
        freezing = KNOBS["t_freeze"].methods or ()
        if check.pattern == "mixed_deeper_dyt" and check.method in freezing:
            problems.append(
                f"{claim.id}: 'mixed' gates on {check.method} pass whenever the freeze fires (a gate whose "
                "entropy stays above eps_H is frozen there); read them on a method without the freeze"
            )
        if check.pattern == "collapse_to_ln" and check.threshold >= GATE_START:
            problems.append(
                f"{claim.id}: a collapse threshold of {check.threshold:g} is the gates' starting weight "
                f"({GATE_START:g}): any drift toward LN passes"
            )
    return problems


def grid_problems(claim: Claim, spec: StudySpec) -> list[str]:
    """A threshold read off a grid needs grid points close to it on both sides."""
    check = claim.check
    if check.type != "width_threshold":
        return []
    from studies.claims.width_threshold import grid_resolves

    values: set[float] = set()
    for method in spec.methods:
        width = spec.search_space_for(method).get("width_expansion")
        if isinstance(width, (Choice, Grid, Fixed)):
            values.update(float(v) for v in _discrete_values(width))  # type: ignore[arg-type]
    reason = grid_resolves(check, sorted(values))
    return [] if reason is None else [f"{claim.id} ({spec.name}): {reason}"]


def source_problems(claim: Claim) -> list[str]:
    """Every number the claim's check was given has a source (the paper's words or NormLab's reason)."""
    return [
        f"{claim.id}: check parameter '{name}' = {value} has no source (add it to the claim's `sources`)"
        for name, value in check_numbers(claim).items()
        if source_for(claim, name) is None
    ]


def tuning_problems(spec: StudySpec) -> list[str]:
    """A tuned study's ASHA rungs must not cut AutoNorm-S trials before or at T_freeze: a trial stopped
    there is ranked before the freeze has had any effect (every rung is grace_period * rf^k)."""
    if spec.scheduler.type != "asha" or "autonorm_s" not in spec.methods or not spec.tunes("autonorm_s"):
        return []
    t_freeze = spec.search_space_for("autonorm_s").get("t_freeze")
    if t_freeze is None:
        return []
    latest = _largest_int(t_freeze)  # the spec's own t_freeze < epochs rule reads it the same way
    if spec.scheduler.grace_period <= latest:
        return [
            f"{spec.name}: ASHA's first rung (grace_period {spec.scheduler.grace_period}) falls at or before "
            f"T_freeze ({latest}): AutoNorm-S trials are cut before the freeze can act"
        ]
    return []


def freeze_problems(claim: Claim, spec: StudySpec) -> list[str]:
    """A claim about what follows the freeze needs specs under which the freeze fires. It fires when the
    gate entropy stays ABOVE eps_H through T_freeze, and the gates start at ln 2 and fall: a high eps_H
    makes it less likely, not more (the reading that cost the ablation's first cpu run every freeze)."""
    if not claim.requires.freeze_fired or "autonorm_s" not in spec.methods:
        return []
    eps_h = spec.search_space_for("autonorm_s").get("eps_h")
    if eps_h is None:
        return []
    # A sampled range reaches its upper bound; a discrete one its largest value.
    if isinstance(eps_h, (Uniform, LogUniform, IntRange)):
        highest = float(eps_h.high)
    else:
        highest = max(float(v) for v in _discrete_values(eps_h))  # type: ignore[arg-type]  # a float knob
    if highest <= DEFAULT_EPS_H:
        return []
    return [
        f"{spec.name}: eps_H {highest:g} is above NormLab's default {DEFAULT_EPS_H:g} in a study that needs "
        "the freeze to fire; the freeze fires only while the entropy stays above eps_H, so a high eps_H "
        "stops it: fire it with an early T_freeze instead"
    ]


def freeze_rule_problems(claim: Claim) -> list[str]:
    """Every claim that reads AutoNorm-S is judged only where its freeze fired: the judge finds the rows
    to check in the check's parameters (studies.claims.preconditions.freezing_rows), so a check that names
    AutoNorm-S anywhere else would escape the rule; the sweep checks the freeze per grid point itself."""
    check = claim.check
    named = sorted(_freezing_methods_named(check.model_dump()))
    rows = freezing_rows(check)
    problems = []
    if named and not rows and check.type != "sweep":
        problems.append(
            f"{claim.id}: the check names {', '.join(named)} where the judge does not look for it, so its "
            "verdict would not be held to the freeze having fired: compare it in a pair or as the method"
        )
    if claim.requires.freeze_fired and not rows:
        problems.append(f"{claim.id}: requires the freeze to fire but reads no AutoNorm-S row")
    return problems


def _freezing_methods_named(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value} if value in FREEZING_METHODS else set()
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return set().union(*(_freezing_methods_named(v) for v in value))
    return set()


def _identity(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k not in STUDY_IDENTITY_FIELDS}


def duplicate_studies(specs: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of claims whose specs (claim id -> spec data) are equal up to their names: one experiment
    run twice. Claims that need the same experiment share one study instead (`shares_study_with`)."""
    return [(a, b) for a, b in combinations(sorted(specs), 2) if _identity(specs[a]) == _identity(specs[b])]
