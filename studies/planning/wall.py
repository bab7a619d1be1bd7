"""Wall time on this cluster: from the trials it already finished of the same dataset and model, else a
prior (the GPU cost model on the cluster's GPUs, or the CPU rule on its CPUs), labelled as one.

Every source prices a seed-epoch of each method and divides the busy time by the trials that train at once.
A sequential design's looks wait for their slowest trial and may train fewer trials than there are slots,
so its wall time is, if anything, longer than this.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from studies.planning.cpu_rule import CPU_RULE, PER_TRIAL_OVERHEAD_S, cpu_seconds_per_epoch
from studies.planning.gpu_price import GpuPrice
from studies.planning.history import History, TimedTrial
from studies.planning.model import WallPricing
from studies.planning.speedups import GATED_METHODS
from studies.planning.trials import Workload
from studies.spec import StudySpec

__all__ = ["Cluster", "WallClock", "trains_on_gpu", "wall_clock"]

# Seconds a trial process spends compiling before it trains, cold, on an H200 (BENCHMARKS.md, 2026-11-30):
# (FrozenLN, AutoNorm-S) per budget.compile mode.
_COLD_COMPILE_S = {"none": (0.0, 0.0), "default": (16.0, 33.0), "reduce-overhead": (28.0, 52.0)}


@dataclass(frozen=True)
class Cluster:
    """What the plan knows of the cluster the study would run on; None where it does not know."""

    cpus: float | None
    gpus: float | None
    source: str  # where the numbers come from, in words


@dataclass(frozen=True)
class WallClock:
    per_seed_epoch: dict[tuple[str, str], float] | None  # (phase, method) -> seconds; None: no prediction
    per_process_s: float  # each Tune trial's time outside its epochs
    concurrency: float
    pricing: WallPricing

    def hours(self, work: Workload) -> float | None:
        if self.per_seed_epoch is None:
            return None
        busy = sum(epochs * self.per_seed_epoch[key] for key, epochs in work.seed_epochs.items())
        return (busy + work.processes * self.per_process_s) / self.concurrency / 3600.0


def trains_on_gpu(spec: StudySpec, cluster: Cluster) -> bool:
    """Whether the trials get a GPU: resources.gpu > 0, or "auto" on a cluster with (or not known to lack)
    GPUs."""
    gpu = spec.resources.gpu
    if gpu == "auto":
        return cluster.gpus is None or cluster.gpus > 0
    return gpu > 0


def _shown(share: float | str) -> str:
    return f"{share:g}" if isinstance(share, float) else share


def _keys(spec: StudySpec) -> list[tuple[str, str]]:
    return [(phase, method) for phase in ("tune", "final") for method in spec.methods]


def _concurrency(timed: tuple[TimedTrial, ...]) -> float:
    """Trials (seeds) that trained at once, on average: their busy seconds over the time any one ran."""
    covered, end = 0.0, None
    for trial in sorted(timed, key=lambda t: t.started):
        if end is None or trial.started >= end:
            covered += trial.seconds
            end = trial.ended
        elif trial.ended > end:
            covered += (trial.ended - end).total_seconds()
            end = trial.ended
    return max(1.0, sum(t.seconds for t in timed) / covered) if covered > 0 else 1.0


def _from_history(spec: StudySpec, history: History) -> WallClock:
    per_method: dict[str, list[float]] = {}
    for trial in history.timed:
        per_method.setdefault(trial.method, []).append(trial.seconds / trial.epochs)
    everyone = statistics.median(r for rates in per_method.values() for r in rates)
    rates = {m: statistics.median(per_method[m]) if m in per_method else everyone for m in spec.methods}
    concurrency = _concurrency(history.timed)
    missing = [m for m in spec.methods if m not in per_method]
    basis = [
        f"{len(history.timed)} finished trials of {spec.dataset} with this model on this cluster: median "
        + ", ".join(f"{m} {statistics.median(per_method[m]):.1f} s" for m in sorted(per_method))
        + " per seed-epoch, setup and reporting included",
        f"they trained {concurrency:.1f} seeds at once on average; the plan assumes the same",
    ]
    if missing:
        basis.append(
            f"{', '.join(missing)} never ran here: priced at the median of every method ({everyone:.1f} s)"
        )
    return WallClock(
        {(phase, m): rates[m] for phase, m in _keys(spec)},
        0.0,
        concurrency,
        WallPricing(
            source="history", prior=False, studies=history.timed_studies, concurrency=concurrency, basis=basis
        ),
    )


def _from_gpu_prior(spec: StudySpec, gpu: GpuPrice, cluster: Cluster) -> WallClock:
    gpus = cluster.gpus
    if gpus == 0:
        return _none(
            f"the spec asks for a GPU (resources.gpu: {_shown(spec.resources.gpu)}) and {cluster.source} has "
            "none: its trials would wait for one"
        )
    if gpu.per_seed_epoch is None:
        return _none(f"no finished trial of {spec.dataset} with this model here, and no GPU prediction")
    frozen, gated = _COLD_COMPILE_S[spec.budget.compile]
    compile_s = gated if GATED_METHODS & set(spec.methods) else frozen
    basis = [
        f"prior: no finished trial of {spec.dataset} with this model here; the GPU-hours above, as if "
        f"every GPU of the cluster were an {gpu.pricing.gpu}",
        f"{cluster.source}: {gpus:g} GPU(s)" if gpus else f"{cluster.source}: GPUs unknown, one assumed",
    ]
    if spec.resources.gpu == "auto" and cluster.gpus is None:
        basis.append(
            "resources.gpu: auto, and whether the cluster has GPUs is not known here: assumed it has"
        )
    if compile_s:
        basis.append(f"{compile_s:.0f} s of cold compile per trial (BENCHMARKS.md, H200)")
    return WallClock(
        {key: hours * 3600.0 for key, hours in gpu.per_seed_epoch.items()},
        PER_TRIAL_OVERHEAD_S + compile_s,
        gpus or 1.0,
        WallPricing(source="gpu_prior", prior=True, studies=[], concurrency=gpus or 1.0, basis=basis),
    )


def _from_cpu_rule(spec: StudySpec, cluster: Cluster) -> WallClock:
    step = cpu_seconds_per_epoch(spec)
    if step.seconds_per_epoch is None:
        return _none(f"no finished trial of {spec.dataset} with this model here, and {step.reason}")
    slots = max(1, int(cluster.cpus // spec.resources.cpu)) if cluster.cpus else None
    basis = [
        CPU_RULE,
        step.reason,
        f"{cluster.source}: {cluster.cpus:g} CPUs, {slots} trial(s) of {spec.resources.cpu:g} CPU at once"
        if slots
        else f"{cluster.source}: CPUs unknown, one trial at a time",
    ]
    return WallClock(
        dict.fromkeys(_keys(spec), step.seconds_per_epoch),
        PER_TRIAL_OVERHEAD_S,
        float(slots or 1),
        WallPricing(source="cpu_prior", prior=True, studies=[], concurrency=float(slots or 1), basis=basis),
    )


def _none(why: str) -> WallClock:
    return WallClock(
        None,
        0.0,
        1.0,
        WallPricing(source="none", prior=True, studies=[], concurrency=None, basis=[why]),
    )


def wall_clock(spec: StudySpec, *, history: History, gpu: GpuPrice, cluster: Cluster) -> WallClock:
    """The wall-time model: the cluster's own record where it has one, else the prior for the device."""
    if history.timed:
        return _from_history(spec, history)
    if trains_on_gpu(spec, cluster):
        return _from_gpu_prior(spec, gpu, cluster)
    return _from_cpu_rule(spec, cluster)
