"""The seed-to-seed spread of paired differences a plan sizes seeds by: measured on an earlier study of the
same dataset and model where the store has one, else a stated prior.

The sd of d_s = method_s - reference_s over the seeds both arms have, pooled over a study's comparisons
(weighted by their degrees of freedom); comparisons of the methods being planned are preferred where the
earlier study had any.
"""

from __future__ import annotations

import math
import statistics

from studies.planning.history import History, PairedValues
from studies.planning.model import Spread

__all__ = ["PRIOR_SD", "PRIOR_SOURCE", "prior_spread", "spread_for", "stored_spread"]

# Accuracy only: other metrics (rmse, perplexity) are in their dataset's own units, where no one number is
# a sensible prior.
PRIOR_SD = 0.01
PRIOR_SOURCE = (
    "prior, not a measurement: one accuracy point, between the spreads NormLab's cpu runs measured "
    "(0.0031 on Fashion-MNIST, 0.022 to 0.028 on digits; studies/catalog/claims.yaml); it varies tenfold "
    "between datasets, so a pilot study in the store replaces it"
)


def _comparisons(paired: PairedValues) -> list[tuple[str, int, float]]:
    """(method, paired seeds, sd of the differences) of each comparison with two or more paired seeds."""
    reference = paired.values.get(paired.reference, {})
    found = []
    for method, values in paired.values.items():
        seeds = sorted(set(values) & set(reference)) if method != paired.reference else []
        if len(seeds) < 2:
            continue
        sd = statistics.stdev(values[s] - reference[s] for s in seeds)
        if math.isfinite(sd) and sd > 0.0:
            found.append((method, len(seeds), sd))
    return found


def stored_spread(history: History, methods: list[str]) -> Spread | None:
    """The pooled spread of the newest earlier study that has one, named; None where none has."""
    for paired in history.paired:
        found = _comparisons(paired)
        planned = [c for c in found if c[0] in methods]
        used = planned or found
        if not used:
            continue
        dof = sum(n - 1 for _, n, _ in used)
        sd = math.sqrt(sum((n - 1) * s * s for _, n, s in used) / dof)
        names = ", ".join(f"{m} - {paired.reference}" for m, _, _ in used)
        return Spread(
            sd=sd,
            source="study",
            study=paired.study,
            comparisons=len(used),
            seeds=max(n for _, n, _ in used),
            basis=f"measured on study {paired.study}: {names}, pooled",
        )
    return None


def prior_spread(metric: str) -> Spread:
    if metric.endswith("accuracy"):
        return Spread(sd=PRIOR_SD, source="prior", study=None, comparisons=0, seeds=0, basis=PRIOR_SOURCE)
    return Spread(
        sd=None,
        source="none",
        study=None,
        comparisons=0,
        seeds=0,
        basis=f"no earlier study of this dataset and model in the store, and no prior for {metric} (its units "
        "are the dataset's own): run a pilot study first",
    )


def spread_for(history: History, methods: list[str], metric: str) -> Spread:
    return stored_spread(history, methods) or prior_spread(metric)
