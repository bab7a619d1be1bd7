"""The level a study's reference must reach on each dataset before a catalog claim gets a verdict.

studies/catalog/convergence.yaml holds one level per dataset with its source (a baseline measured on the
same split, a paper's number, or NormLab's choice and why). A claim about trained models is `not tested`
on a study whose reference falls short (studies.claims.preconditions).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

from studies.convergence import Convergence

__all__ = ["CONVERGENCE_FILE", "convergence_for", "convergence_levels"]

CONVERGENCE_FILE = Path(__file__).resolve().parent / "convergence.yaml"


@cache
def convergence_levels() -> dict[str, Convergence]:
    """dataset -> the reference's convergence level (validated; read once per process)."""
    raw = yaml.safe_load(CONVERGENCE_FILE.read_text(encoding="utf-8"))
    levels = raw.get("levels") if isinstance(raw, dict) else None
    if not isinstance(levels, dict):
        raise ValueError(f"{CONVERGENCE_FILE} must hold a mapping with a `levels:` mapping")
    return {str(dataset): Convergence.model_validate(level) for dataset, level in levels.items()}


def convergence_for(dataset: str) -> Convergence | None:
    return convergence_levels().get(dataset)
