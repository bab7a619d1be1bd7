"""`plan_study`: a StudySpec, and what the store knows, turned into a StudyPlan. Runs nothing, stores
nothing; the only slow part is the sequential simulation, which is cached."""

from __future__ import annotations

import statistics

from studies.datasets import DATASET_METRICS
from studies.limits import StudyLimits
from studies.planning.fixed import fixed_design
from studies.planning.gpu_price import GpuPrice, gpu_price
from studies.planning.history import History
from studies.planning.memory import memory_plan
from studies.planning.model import (
    Cost,
    PhaseTrials,
    Scenario,
    ScenarioName,
    SequentialPlan,
    Spread,
    StudyPlan,
)
from studies.planning.simulate import RANDOM_SEED, simulate, simulations_for
from studies.planning.spread import spread_for
from studies.planning.trials import (
    Workload,
    batch_count,
    final_workload,
    largest_batch,
    resolve_seeds_per_trial,
    tune_epochs,
    tune_workload,
)
from studies.planning.wall import Cluster, WallClock, trains_on_gpu, wall_clock
from studies.spec import SequentialDesign, StudySpec

__all__ = ["UNKNOWN_CLUSTER", "plan_study"]

UNKNOWN_CLUSTER = Cluster(cpus=None, gpus=None, source="the cluster's size was not given")


def _model_label(spec: StudySpec) -> str:
    name = spec.model.preset or spec.model.backbone(spec.dataset)
    overrides = ", ".join(f"{k} {v}" for k, v in spec.model.overrides.items())
    return f"{name} ({overrides})" if overrides else name


class _Pricer:
    """Workloads into Costs, at one GPU price and one wall clock."""

    def __init__(self, gpu: GpuPrice, wall: WallClock) -> None:
        self.gpu, self.wall = gpu, wall

    def __call__(self, work: Workload) -> Cost:
        return Cost(
            seeds_per_method=work.seeds_per_method,
            trials=work.trials,
            processes=work.processes,
            gpu_hours=self.gpu.hours(work),
            wall_hours=self.wall.hours(work),
        )


def _final_processes(spec: StudySpec, per_trial: int) -> int:
    """Tune trials of one method's final seeds (of one grid point): a sequential design batches each look."""
    if spec.sequential is None:
        return batch_count(len(spec.seeds), per_trial)
    design = spec.sequential
    return sum(batch_count(len(design.seeds_added_at(k)), per_trial) for k in range(len(design.looks())))


def _largest_final_batch(spec: StudySpec, per_trial: int) -> int:
    if spec.sequential is None:
        return largest_batch(len(spec.seeds), per_trial)
    design = spec.sequential
    return max(largest_batch(len(design.seeds_added_at(k)), per_trial) for k in range(len(design.looks())))


def _phases(spec: StudySpec, per_trial: int) -> list[PhaseTrials]:
    phases = []
    if spec.kind == "compare" and any(spec.tunes(m) for m in spec.methods):
        samples = {m: spec.num_samples_for(m) if spec.tunes(m) else 0 for m in spec.methods}
        phases.append(
            PhaseTrials(
                phase="tune",
                trials=samples,
                processes=samples,
                seeds_per_method=None,
                epochs_per_trial=tune_epochs(spec),
            )
        )
    points = {m: len(spec.grid_points(m)) if spec.kind == "grid" else 1 for m in spec.methods}
    processes = _final_processes(spec, per_trial)
    phases.append(
        PhaseTrials(
            phase="grid" if spec.kind == "grid" else "final",
            trials={m: points[m] * len(spec.seeds) for m in spec.methods},
            processes={m: points[m] * processes for m in spec.methods},
            seeds_per_method=len(spec.seeds),
            epochs_per_trial=float(spec.budget.epochs),
        )
    )
    return phases


def _scenarios(design: SequentialDesign, reference: str) -> list[tuple[ScenarioName, float, str]]:
    """(name, true difference, description) of the truths a design is simulated under."""
    if design.test == "superiority":
        effect = float(design.effect or 0.0)
        return [
            ("effect", effect, f"every method {effect:g} better than {reference} (the power is for this)"),
            ("no_effect", 0.0, f"no method differs from {reference} (a decision is a type-I error)"),
        ]
    margin = float(design.margin or 0.0)
    edge = -margin if design.test == "non_inferiority" else margin
    return [
        ("no_effect", 0.0, f"every method level with {reference} (the power is for this)"),
        (
            "at_margin",
            edge,
            f"every method {edge:+g} from {reference}, at the margin (a decision is a type-I error)",
        ),
    ]


def _by_method(spec: StudySpec, by_arm: dict[str, float]) -> dict[str, float]:
    """Per-arm means as final_workload takes them, per method: a grid method's points' average (final_workload
    multiplies it by the points)."""
    if spec.kind != "grid":
        return dict(by_arm)
    return {
        m: statistics.fmean(by_arm[spec.arm_of(m, point.label)] for point in spec.grid_points(m))
        for m in spec.methods
    }


def _sequential(
    spec: StudySpec,
    spread: Spread,
    *,
    tune: Workload,
    per_trial: int,
    price: _Pricer,
    planned: Cost,
    simulations: int,
) -> SequentialPlan:
    design = spec.sequential
    assert design is not None
    first_n = design.first_seeds
    first = price(
        tune
        + final_workload(
            spec,
            dict.fromkeys(spec.methods, float(first_n)),
            dict.fromkeys(spec.methods, float(batch_count(first_n, per_trial))),
            seeds_per_method=first_n,
        )
    )
    scenarios = []
    if spec.sequential_comparisons < 1:
        reason = "no expected figures: one method has no comparison to decide, so it trains every look"
    elif spread.sd is not None:
        reference = spec.sequential_reference
        for name, truth, description in _scenarios(design, reference or "the points it is compared with"):
            run = simulate(
                design,
                methods=spec.sequential_arms,
                reference=reference,
                sd=spread.sd,
                truth=truth,
                seeds_per_trial=per_trial,
                simulations=simulations,
            )
            mean_seeds = statistics.fmean(run.seeds.values())
            seeds, processes = _by_method(spec, run.seeds), _by_method(spec, run.processes)
            expected = price(tune + final_workload(spec, seeds, processes, seeds_per_method=mean_seeds))
            scenarios.append(
                Scenario(
                    name=name,
                    truth=truth,
                    description=description,
                    expected=expected,
                    seeds_by_method=run.seeds,
                    seeds_standard_error=run.seeds_standard_error,
                    rejected=run.rejected,
                    any_rejected=run.any_rejected,
                    stopped_early=run.stopped_early,
                    decisions=run.decisions,
                )
            )
        reason = (
            f"expected figures: SequentialMonitor on {simulations:,} simulated studies per scenario (random "
            f"seed {RANDOM_SEED}), paired differences of sd {spread.sd:.3g} ({spread.source})"
        )
    else:
        reason = f"no expected figures: {spread.basis}"
    return SequentialPlan(
        test=design.test,
        effect=design.effect,
        margin=design.margin,
        alpha=design.alpha,
        power=design.power,
        looks=design.looks(),
        first=first,
        maximum=planned,
        scenarios=scenarios,
        simulations=simulations if scenarios else 0,
        random_seed=RANDOM_SEED,
        reason=reason,
    )


def plan_study(
    spec: StudySpec,
    *,
    history: History | None = None,
    cluster: Cluster = UNKNOWN_CLUSTER,
    spread: Spread | None = None,
    simulations: int | None = None,
    limits: StudyLimits | None = None,
) -> StudyPlan:
    """The plan of `spec`. `history`: what the store holds of earlier studies of its dataset and model
    (read_history); `cluster`: what is known of the cluster it would run on; `spread`: a spread to size
    by instead of the stored one or the prior; `simulations`: studies simulated per scenario (None: by the
    number of comparisons, simulate.simulations_for); `limits`: the server's, which the largest trial's
    memory is set against (None: the estimate alone)."""
    with spec.plugins_visible():  # its plugins' methods and backbones, as the facts their check reported
        return _plan_study(
            spec, history=history, cluster=cluster, spread=spread, simulations=simulations, limits=limits
        )


def _plan_study(
    spec: StudySpec,
    *,
    history: History | None,
    cluster: Cluster,
    spread: Spread | None,
    simulations: int | None,
    limits: StudyLimits | None,
) -> StudyPlan:
    history = history or History()
    metric = DATASET_METRICS[spec.dataset][0]
    per_trial, per_trial_basis = resolve_seeds_per_trial(spec, on_gpu=trains_on_gpu(spec, cluster))
    on_gpu_per_trial, _ = resolve_seeds_per_trial(spec, on_gpu=True)
    gpu = gpu_price(spec, final_stacked=_largest_final_batch(spec, on_gpu_per_trial))
    wall = wall_clock(spec, history=history, gpu=gpu, cluster=cluster)
    spread = spread or spread_for(history, spec.methods, metric)
    price = _Pricer(gpu, wall)
    tune = tune_workload(spec)
    processes = float(_final_processes(spec, per_trial))
    planned = price(
        tune
        + final_workload(
            spec,
            dict.fromkeys(spec.methods, float(len(spec.seeds))),
            dict.fromkeys(spec.methods, processes),
            seeds_per_method=len(spec.seeds),
        )
    )

    def fixed_cost(n: int) -> Cost:
        seeds = dict.fromkeys(spec.methods, float(n))
        batches = dict.fromkeys(spec.methods, float(batch_count(n, per_trial)))
        return price(tune + final_workload(spec, seeds, batches, seeds_per_method=n))

    return StudyPlan(
        name=spec.name,
        dataset=spec.dataset,
        model=_model_label(spec),
        kind=spec.kind,
        methods=list(spec.methods),
        reference=spec.reference,
        metric=metric,
        design="fixed" if spec.sequential is None else "sequential",
        phases=_phases(spec, per_trial),
        seeds_per_trial=per_trial,
        seeds_per_trial_basis=per_trial_basis,
        planned=planned,
        gpu=gpu.pricing,
        wall=wall.pricing,
        spread=spread,
        fixed=fixed_design(spec, spread, cost_at=fixed_cost),
        sequential=None
        if spec.sequential is None
        else _sequential(
            spec,
            spread,
            tune=tune,
            per_trial=per_trial,
            price=price,
            planned=planned,
            simulations=simulations or simulations_for(spec.sequential_comparisons),
        ),
        memory=memory_plan(spec, cluster=cluster, limits=limits),
    )
