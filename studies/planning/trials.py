"""How many trials a study runs: seeds per Tune trial, seed batches, and what a design trains.

A trial, as the store and `normlab status` count it, is one seed of one configuration; a Tune trial (a
process) may train a batch of seeds together (`resources.seeds_per_trial`). `Workload` holds both, and the
seed-epochs each method trains, from which GPU-hours and wall time are priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from studies.catalog.cost import _asha_epochs
from studies.sizing import DEFAULT_GPU_SEEDS_PER_TRIAL
from studies.spec import StudySpec

__all__ = [
    "DEFAULT_GPU_SEEDS_PER_TRIAL",
    "Workload",
    "batch_count",
    "final_workload",
    "largest_batch",
    "resolve_seeds_per_trial",
    "tune_epochs",
    "tune_workload",
]

# workers.trials.plan's "auto" on a GPU: at most this many seeds per trial (studies.sizing's, which the
# submission's memory check resolves "auto" with; a test checks the workers agree, the API may not import them).


def resolve_seeds_per_trial(spec: StudySpec, *, on_gpu: bool) -> tuple[int, str]:
    """The seed batch size as workers.trials.plan.seeds_per_trial_for resolves it, and why."""
    requested = spec.resources.seeds_per_trial
    if requested != "auto":
        return int(requested), "resources.seeds_per_trial, set in the spec"
    if not on_gpu:
        return 1, "auto: 1 where trials train on CPU"
    if spec.budget.compile != "none":
        return 1, "auto: 1 under budget.compile"
    k = max(1, min(len(spec.seeds), DEFAULT_GPU_SEEDS_PER_TRIAL))
    return k, f"auto: up to {DEFAULT_GPU_SEEDS_PER_TRIAL} seeds per GPU trial, in balanced batches"


def batch_count(seeds: int, per_trial: int) -> int:
    """Tune trials for `seeds` seeds at most `per_trial` each (workers.trials.plan.seed_batches' count)."""
    return math.ceil(seeds / per_trial) if seeds > 0 else 0


def largest_batch(seeds: int, per_trial: int) -> int:
    """The largest batch seed_batches makes: 10 seeds at 8 per trial are 5 + 5, so 5 seeds train together."""
    count = batch_count(seeds, per_trial)
    return math.ceil(seeds / count) if count else 0


def tune_epochs(spec: StudySpec) -> float:
    """Mean epochs a tuning trial trains: the whole budget, or ASHA's rungs' mean (the cost model's own
    rung arithmetic, so GPU-hours and wall time count the same epochs)."""
    return _asha_epochs(spec)


@dataclass(frozen=True)
class Workload:
    """What a design trains. `seed_epochs` is keyed by (phase, method), phase "tune" or "final" (grid
    points count as final: one seed each, the whole budget)."""

    seeds_per_method: float
    trials: float
    processes: float
    seed_epochs: dict[tuple[str, str], float] = field(default_factory=dict)

    def __add__(self, other: Workload) -> Workload:
        epochs = dict(self.seed_epochs)
        for key, value in other.seed_epochs.items():
            epochs[key] = epochs.get(key, 0.0) + value
        return Workload(
            seeds_per_method=self.seeds_per_method + other.seeds_per_method,
            trials=self.trials + other.trials,
            processes=self.processes + other.processes,
            seed_epochs=epochs,
        )


def tune_workload(spec: StudySpec) -> Workload:
    """The tune phase: each tuned method's samples, one seed each (tune trials are never batched)."""
    if spec.kind != "compare":
        return Workload(0.0, 0.0, 0.0)
    samples = {m: spec.num_samples_for(m) for m in spec.methods if spec.tunes(m)}
    epochs = tune_epochs(spec)
    total = float(sum(samples.values()))
    return Workload(
        seeds_per_method=0.0,
        trials=total,
        processes=total,
        seed_epochs={("tune", m): n * epochs for m, n in samples.items()},
    )


def final_workload(
    spec: StudySpec, seeds: dict[str, float], processes: dict[str, float], *, seeds_per_method: float
) -> Workload:
    """The final (or grid) phase when method m trains `seeds[m]` seeds in `processes[m]` Tune trials; a grid
    method trains every one of its points on each seed."""
    points = {m: len(spec.grid_points(m)) if spec.kind == "grid" else 1 for m in spec.methods}
    return Workload(
        seeds_per_method=seeds_per_method,
        trials=sum(seeds[m] * points[m] for m in seeds),
        processes=sum(processes[m] * points[m] for m in processes),
        seed_epochs={("final", m): seeds[m] * points[m] * spec.budget.epochs for m in seeds},
    )
