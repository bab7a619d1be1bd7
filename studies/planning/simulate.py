"""What a sequential design is expected to train: studies.sequential's SequentialMonitor, run on simulated
seeds, the same class the driver decides looks with.

Each simulated study draws every arm's final metric per seed as its true level plus normal noise of sd / √2,
so the paired differences have the planned spread and comparisons sharing the reference are correlated as
real ones are (0.5). Every non-reference method is `truth` better than the reference. The monitor looks
after each batch, and only the arms it names train the next one. Seeded, so a plan is reproducible; cached
per (design, methods, spread, truth), since a plan is often asked for twice (the CLI, then the API).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from studies.planning.trials import batch_count
from studies.sequential import SequentialMonitor
from studies.spec import SequentialDesign

__all__ = ["DEFAULT_SIMULATIONS", "RANDOM_SEED", "Simulated", "simulate", "simulations_for"]

# Simulated studies per scenario, for a design of one or two comparisons: the expected seeds' Monte Carlo
# standard error is then a few hundredths of a seed and a share's about 0.01. A study costs the monitor
# time in proportion to its comparisons, while each adds its own draws to the averages, so larger families
# get fewer studies: about COMPARISON_BUDGET simulated comparisons, at least MIN_SIMULATIONS studies. A
# 7-method design then takes a few seconds on one core.
DEFAULT_SIMULATIONS = 2000
COMPARISON_BUDGET = 4000
MIN_SIMULATIONS = 500
RANDOM_SEED = 35
_REJECTIONS = frozenset({"efficacy", "non_inferior", "equivalent"})


@dataclass(frozen=True)
class Simulated:
    truth: float
    simulations: int
    seeds: dict[str, float]  # method -> mean final seeds it trains
    seeds_standard_error: float  # of the mean seeds per method
    processes: dict[str, float]  # method -> mean Tune trials (a look's seed batch is one per trial)
    rejected: float  # share of comparisons decided for their goal
    any_rejected: float  # share of studies with at least one
    stopped_early: float  # share of studies decided before the last look
    decisions: dict[str, float]  # decision -> share of comparisons


def simulations_for(comparisons: int) -> int:
    """Simulated studies per scenario for a design of `comparisons` comparisons with the reference."""
    return max(MIN_SIMULATIONS, min(DEFAULT_SIMULATIONS, COMPARISON_BUDGET // max(1, comparisons)))


def simulate(
    design: SequentialDesign,
    *,
    methods: list[str],
    reference: str | None,
    sd: float,
    truth: float,
    seeds_per_trial: int,
    simulations: int = DEFAULT_SIMULATIONS,
    random_seed: int = RANDOM_SEED,
) -> Simulated:
    """`simulations` studies of `design` when every method is `truth` better than `reference` (in the
    metric's better direction) and paired differences have standard deviation `sd`. Without a reference
    (a grid, whose comparisons are the design's pairs), every arm a pair compares against is the level
    the others are `truth` better than."""
    if not (sd > 0.0 and math.isfinite(sd)):
        raise ValueError(f"the spread must be a positive number, got {sd}")
    return _simulate(
        design.model_dump_json(),
        tuple(methods),
        reference,
        sd,
        truth,
        seeds_per_trial,
        simulations,
        random_seed,
    )


@lru_cache(maxsize=256)
def _simulate(
    design_json: str,
    methods: tuple[str, ...],
    reference: str | None,
    sd: float,
    truth: float,
    seeds_per_trial: int,
    simulations: int,
    random_seed: int,
) -> Simulated:
    design = SequentialDesign.model_validate_json(design_json)
    looks = design.looks()
    added = [design.seeds_added_at(look) for look in range(len(looks))]
    baselines = {reference} if reference is not None else {against for _, against in design.pairs}
    means = np.array([0.0 if m in baselines else truth for m in methods])
    rng = np.random.default_rng(random_seed)
    seeds_total = dict.fromkeys(methods, 0)
    processes_total = dict.fromkeys(methods, 0)
    decisions: dict[str, int] = {}
    per_study_mean_seeds = []
    any_rejected = stopped_early = 0
    for _ in range(simulations):
        draws = means[:, None] + rng.normal(0.0, sd / math.sqrt(2.0), size=(len(methods), design.max_seeds))
        monitor = SequentialMonitor(design, methods=list(methods), reference=reference, higher_is_better=True)
        values: dict[str, dict[int, float]] = {m: {} for m in methods}
        arms = list(methods)
        for look, seeds in enumerate(added):
            for arm in arms:
                row = draws[methods.index(arm)]
                values[arm].update((s, float(row[s])) for s in seeds)
                processes_total[arm] += batch_count(len(seeds), seeds_per_trial)
            arms = monitor.look(values).open_arms
            if not arms:
                stopped_early += look + 1 < len(looks)
                break
        for method in methods:
            seeds_total[method] += len(values[method])
        per_study_mean_seeds.append(sum(len(v) for v in values.values()) / len(methods))
        ends = [state.decision for state in monitor.comparisons.values()]
        for decision in ends:
            decisions[decision] = decisions.get(decision, 0) + 1
        any_rejected += any(d in _REJECTIONS for d in ends)
    comparisons = simulations * len(monitor.comparisons)
    return Simulated(
        truth=truth,
        simulations=simulations,
        seeds={m: n / simulations for m, n in seeds_total.items()},
        seeds_standard_error=statistics.stdev(per_study_mean_seeds) / math.sqrt(simulations)
        if simulations > 1
        else math.nan,
        processes={m: n / simulations for m, n in processes_total.items()},
        rejected=sum(n for d, n in decisions.items() if d in _REJECTIONS) / comparisons,
        any_rejected=any_rejected / simulations,
        stopped_early=stopped_early / simulations,
        decisions={d: n / comparisons for d, n in sorted(decisions.items())},
    )
