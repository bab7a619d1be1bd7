"""GPU-hours per seed-epoch of each method, from studies/catalog/cost.py and the measured speed-ups.

The cost model prices a whole spec. A plan needs a price per seed-epoch, to price a first look, a maximum
or a simulated study; the cost model is linear in the seeds, so the price of one final seed is the
difference between the same spec on two seeds and on one, asked of the cost model itself (its rates and
extrapolations stay its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from studies.catalog.cost import predicted_gpu_cost
from studies.planning.model import GpuPricing
from studies.planning.speedups import Speedup, speedup
from studies.planning.trials import Workload
from studies.spec import StudySpec

__all__ = ["GPU", "GpuPrice", "gpu_price"]

GPU = "NVIDIA H200"  # where studies/catalog/cost.py's rates were measured (BENCHMARKS.md)


@dataclass(frozen=True)
class GpuPrice:
    per_seed_epoch: dict[tuple[str, str], float] | None  # (phase, method) -> GPU-hours; None: no prediction
    pricing: GpuPricing

    def hours(self, work: Workload) -> float | None:
        if self.per_seed_epoch is None:
            return None
        return sum(epochs * self.per_seed_epoch[key] for key, epochs in work.seed_epochs.items())


def _eager_hours_per_seed_epoch(spec: StudySpec, method: str) -> float | None:
    one = spec.model_copy(update={"methods": [method], "seeds": [0]})
    two = spec.model_copy(update={"methods": [method], "seeds": [0, 1]})
    low, high = predicted_gpu_cost(one).hours_no_stopping, predicted_gpu_cost(two).hours_no_stopping
    if low is None or high is None:
        return None
    points = len(spec.grid_points(method)) if spec.kind == "grid" else 1
    return (high - low) / (points * spec.budget.epochs)


def _who(spec: StudySpec, methods: list[str]) -> str:
    return "every method" if set(methods) == set(spec.methods) else ", ".join(methods)


def gpu_price(spec: StudySpec, *, final_stacked: int) -> GpuPrice:
    """Prices on the cost model's GPU; `final_stacked`: the final or grid seeds one trial trains together
    (as it would on a GPU)."""
    whole = predicted_gpu_cost(spec)
    if whole.hours_no_stopping is None:
        return GpuPrice(None, GpuPricing(gpu=GPU, provenance="none", basis=list(whole.basis)))
    prices: dict[tuple[str, str], float] = {}
    applied: dict[str, tuple[Speedup, list[str]]] = {}  # note -> (speed-up, the methods it applies to)
    phases: tuple[Literal["tune", "final"], ...] = ("tune", "final")
    for method in spec.methods:
        eager = _eager_hours_per_seed_epoch(spec, method)
        assert eager is not None, "the cost model prices every method of a spec it prices"
        for phase in phases:
            if phase == "tune" and not (spec.kind == "compare" and spec.tunes(method)):
                continue
            found = speedup(spec, method, stacked=1 if phase == "tune" else final_stacked, phase=phase)
            prices[(phase, method)] = eager / found.factor
            applied.setdefault(found.note, (found, []))[1].append(method)
    measured = whole.measured and all(found.measured_as_is for found, _ in applied.values())
    basis = [*whole.basis, *(f"{_who(spec, methods)}: {note}" for note, (_, methods) in applied.items())]
    if spec.resources.gpu == 0:
        basis.append(
            "the spec trains on CPU (resources.gpu: 0): these are what its trials would take on the GPU"
        )
    return GpuPrice(
        prices, GpuPricing(gpu=GPU, provenance="measured" if measured else "extrapolated", basis=basis)
    )
