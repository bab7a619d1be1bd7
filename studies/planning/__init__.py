"""A study's plan before launch: trials per phase, GPU-hours on a stated GPU, wall time on this cluster,
the seeds a fixed design needs, and what a sequential design is expected to take.

    plan = plan_study(spec, history=read_history(session, spec), cluster=Cluster(cpus=8, gpus=0, ...))

`plan_study` runs nothing and stores nothing. Its figures say where they come from: GPU-hours from
studies/catalog/cost.py (measured or extrapolated) and the speed-ups BENCHMARKS.md measured; wall time from
this cluster's finished trials of the same dataset and model, else a prior; the spread of paired
differences from an earlier study in the store, else a stated prior; a sequential design's expected seeds
from SequentialMonitor on simulated studies. Imports neither torch nor FastAPI.

Layout: `model` (the StudyPlan the API answers), `trials` (seed batches, workloads), `speedups` and
`gpu_price` (GPU-hours), `cpu_rule` and `wall` (wall time), `history` (the store's record), `spread`,
`fixed` (fixed-design seeds), `simulate` (the sequential design), `memory` (the largest trial's memory,
studies.spec.memory's estimate against the server's limits), `plan` (putting them together).
"""

from studies.planning.history import History, read_history, without_study
from studies.planning.model import (
    Cost,
    FixedDesignPlan,
    GpuPricing,
    MemoryPlan,
    PhaseTrials,
    Scenario,
    SequentialPlan,
    Spread,
    StudyPlan,
    WallPricing,
)
from studies.planning.plan import UNKNOWN_CLUSTER, plan_study
from studies.planning.simulate import DEFAULT_SIMULATIONS
from studies.planning.wall import Cluster

__all__ = [
    "DEFAULT_SIMULATIONS",
    "UNKNOWN_CLUSTER",
    "Cluster",
    "Cost",
    "FixedDesignPlan",
    "GpuPricing",
    "History",
    "MemoryPlan",
    "PhaseTrials",
    "Scenario",
    "SequentialPlan",
    "Spread",
    "StudyPlan",
    "WallPricing",
    "plan_study",
    "read_history",
    "without_study",
]
