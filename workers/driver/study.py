"""Run one study on the Ray cluster: tune each method, then re-run the winners on shared seeds.

Phase 1 (`compare` only): per method, Ray Tune + OptunaSearch over that method's knobs on the
validation split, every sample on `spec.tune_seed` (the first of the spec's tune_seeds, which are
disjoint from its final seeds; seeds are replicates, never searched).
Phase 2: each method's best config on EVERY declared seed, on the test split, so the comparison is
paired. `grid` studies run every grid point x seed instead (look by look under a sequential design:
workers.driver.arm_search). Every finished trial is written to the
database by TrialRecorder as it finishes.

Both phases of a compare study run as one Tune experiment (workers.driver.method_search): a method's final
trials start as soon as its own tuning has ended, and every trial runs in a reused trial process.
"""

from __future__ import annotations

import logging
import math
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray
from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from sqlalchemy.engine import Engine

from normlab import REGISTRY
from studies.sequential import monitor_for
from studies.spec import Fixed, StudySpec
from studies.store import (
    TERMINAL_STATUSES,
    InvalidStatusTransitionError,
    StoredTrialPlan,
    StudyStatus,
    TrialStatus,
    get_study,
    list_trials,
    session_scope,
    set_study_runtime,
    set_study_status,
    set_study_trial_plan,
    study_trial_plan,
)
from studies.trial_config import FINAL_PHASE, GRID_PHASE, ORCHESTRATION_KEYS, TUNE_PHASE, Key, trial_seeds
from workers.driver.arm_search import ArmSearch, grid_seed_fields
from workers.driver.completeness import ensure_complete
from workers.driver.final_schedule import FinalSchedule, FixedFinals, SequentialFinals
from workers.driver.finalize import fill_missing_run_ids, finalize_mlflow_runs
from workers.driver.looks import StoredLooks
from workers.driver.method_search import MethodScheduler, StudySearch
from workers.driver.parent_run import ParentRun, ensure_experiment, ensure_parent_run, log_results_artifacts
from workers.driver.recorder import study_callbacks
from workers.driver.search_space import to_tune_space
from workers.driver.throughput import choose_by_throughput, measures_settings
from workers.driver.trial_configs import StudyTrialConfigs
from workers.driver.trial_errors import NoTrialSucceededError, study_error
from workers.plugins.activate import activate_extensions, stored_extensions
from workers.settings import WorkerSettings
from workers.tracking.spool import SPOOL_DIR_NAME
from workers.trials.entry import study_trial
from workers.trials.plan import TrialPlan, plan_trials
from workers.trials.relay import warm_trial_hosts_for_study
from workers.trials.throughput import CACHE_FILE_NAME, ThroughputCache, ThroughputChoice

__all__ = ["DriverContext", "checkpoint_interval_s", "concurrent_trials", "open_parent_run", "run_study"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DriverContext:
    engine: Engine
    database_url: str
    mlflow_tracking_uri: str
    results_dir: Path  # Tune experiment storage: lets a resubmitted driver resume its sweeps


@dataclass(frozen=True)
class MetricInfo:
    name: str  # accuracy | rmse | perplexity
    higher_is_better: bool

    @property
    def mode(self) -> str:
        return "max" if self.higher_is_better else "min"


def dataset_metric(dataset: str) -> MetricInfo:
    # studies.datasets' metric table, which the data registry reads too: the driver process never imports
    # torch (workers.data), which would cost every study seconds of start-up.
    record = REGISTRY.datasets.get(dataset)  # a plugin's or a user dataset's too, once activated
    return MetricInfo(name=record.metric, higher_is_better=record.higher_is_better)


def run_study(study_id: str, ctx: DriverContext) -> None:
    """Drive a study to a terminal status; any exception, or no trial succeeded, marks it failed with one
    line that says why (workers.driver.trial_errors.study_error) and the detail after it."""
    with session_scope(ctx.engine, readonly=True) as session:
        study = get_study(session, study_id=study_id)
    if study.status in TERMINAL_STATUSES:
        log.info("study %s is already %s; nothing to do", study_id, study.status)
        return
    try:
        # The stored source, not the user's path: a resumed study runs exactly what was submitted.
        activate_extensions(stored_extensions(study.spec), data_builders=False)
        spec = StudySpec.model_validate(study.spec)
        with session_scope(ctx.engine) as session:
            set_study_status(session, study_id=study_id, status=StudyStatus.RUNNING)
        _run(study_id, spec, ctx)
        _fail_unless_a_trial_succeeded(ctx, study_id)
    except Exception as exc:
        error = _failure_message(ctx, study_id, exc, traceback.format_exc(limit=20))
        log.error("study %s failed: %s", study_id, error)
        _finish(ctx, study_id, StudyStatus.FAILED, error=error)
        raise
    _finish(ctx, study_id, StudyStatus.SUCCEEDED)


def _fail_unless_a_trial_succeeded(ctx: DriverContext, study_id: str) -> None:
    """Tune ends an experiment whose every trial failed as if it had run (a grid study, or final trials
    after a good tuning): such a study has nothing to compare, and failed."""
    with session_scope(ctx.engine, readonly=True) as session:
        trials = list_trials(session, study_id=study_id)
    statuses = {trial.status for trial in trials}
    if TrialStatus.FAILED in statuses and TrialStatus.SUCCEEDED not in statuses:
        raise NoTrialSucceededError(f"no trial of study {study_id} succeeded")


def _failure_message(ctx: DriverContext, study_id: str, exc: BaseException, trace: str) -> str:
    """The study's error: why in one line (with the first failed trial's error), then the detail."""
    try:
        with session_scope(ctx.engine, readonly=True) as session:
            trials = list_trials(session, study_id=study_id)
    except Exception:  # the database itself may be what failed: the driver's error alone, then
        log.exception("could not read the trials of study %s to say why it failed", study_id)
        trials = []
    return study_error(trials, cause=exc, trace=trace)


def _finish(ctx: DriverContext, study_id: str, status: StudyStatus, error: str | None = None) -> None:
    """Record the outcome unless the study was cancelled meanwhile (a cancel wins over a late finish)."""
    try:
        with session_scope(ctx.engine) as session:
            set_study_status(session, study_id=study_id, status=status, error=error)
    except InvalidStatusTransitionError:
        log.info("study %s was cancelled before the driver could record %s", study_id, status)


def _run(study_id: str, spec: StudySpec, ctx: DriverContext) -> None:
    if not ray.is_initialized():
        ray.init(address="auto", log_to_driver=False)
    warm_trial_hosts_for_study(cpus_per_trial=spec.resources.cpu, gpu=spec.resources.gpu)
    client = MlflowClient(ctx.mlflow_tracking_uri)
    parent = open_parent_run(client, study_id, spec, ctx)
    status = "FINISHED"
    try:  # from the moment the parent run exists: a cancel's SIGTERM (SystemExit) closes it KILLED
        with session_scope(ctx.engine) as session:
            set_study_runtime(session, study_id=study_id, mlflow_parent_run_id=parent.run_id)
        _run_sweeps(study_id, spec, ctx, client=client, parent=parent)
    except (KeyboardInterrupt, SystemExit):
        status = "KILLED"  # Ray stopped the job (cancel) or the driver was interrupted
        raise
    except BaseException:
        status = "FAILED"
        raise
    finally:
        if status != "KILLED":  # a stopped job leaves quickly; GET /results still has everything
            # Best-effort (never raises): the results table and evidence figures as parent-run artifacts.
            log_results_artifacts(client, parent.run_id, engine=ctx.engine, study_id=study_id)
        try:
            client.set_terminated(parent.run_id, status=status)
        except Exception as exc:
            log.warning("could not close the MLflow parent run: %s", exc)


def open_parent_run(client: MlflowClient, study_id: str, spec: StudySpec, ctx: DriverContext) -> ParentRun:
    """The study's MLflow parent run, with its experiment recorded in the database before the run exists.

    The reconcile loop closes the RUNNING runs of an ended study in the experiment the database names, once
    its driver has ended; so a driver stopped at any moment (a cancel in its first seconds, a SIGKILL after
    Ray's grace period) leaves no run that nothing can find. From here on the caller closes the run itself.
    """
    reach = f"reach MLflow at {ctx.mlflow_tracking_uri}"
    experiment_id = _with_retries(
        lambda: ensure_experiment(client, study_id=study_id, study_name=spec.name, dataset=spec.dataset),
        what=reach,
    )
    with session_scope(ctx.engine) as session:
        set_study_runtime(session, study_id=study_id, mlflow_experiment_id=experiment_id)
    return _with_retries(
        lambda: ensure_parent_run(
            client,
            study_id=study_id,
            study_name=spec.name,
            dataset=spec.dataset,
            spec=spec.model_dump(mode="json"),
            experiment_id=experiment_id,
        ),
        what=reach,
    )


def _run_sweeps(
    study_id: str, spec: StudySpec, ctx: DriverContext, *, client: MlflowClient, parent: ParentRun
) -> None:
    """Plan the study's trials and run its Tune experiment(s) to their end."""
    metric = dataset_metric(spec.dataset)
    settings = WorkerSettings.from_env()
    configs = StudyTrialConfigs(spec)
    every_s = checkpoint_interval_s(spec, settings)
    base = configs.base(
        study_id=study_id,
        checkpoint_every_s=every_s,
        mlflow_tracking_uri=ctx.mlflow_tracking_uri,
        mlflow_experiment_id=parent.experiment_id,
        mlflow_parent_run_id=parent.run_id,
        # Where trackers journal what MLflow has not taken yet (on the nodes' data dir, shared in a cluster).
        mlflow_spool_dir=str(settings.data_dir / SPOOL_DIR_NAME),
    )
    # A restarted driver keeps what the first one resolved: its measured choice, or (when it measured
    # nothing) the spec-time rule, so the study's seed batches and compile mode never change mid-study.
    planning = _stored_planning(ctx, study_id)
    plan = plan_study_trials(
        spec,
        base,
        choose_settings=planning.plan is None and measures_settings(spec, planning.spec_fields_set),
        cache_path=settings.data_dir / CACHE_FILE_NAME,
        kept=kept_choice(planning.plan),
    )
    base = {**base, Key.COMPILE: plan.compile_mode}  # the measured mode, where one was chosen
    log.info("study %s: %s", study_id, plan.describe())
    log.info(
        "study %s: trials checkpoint %s",
        study_id,
        "every epoch"
        if every_s <= 0
        else f"their last epoch and, before it, one per {every_s:g} s of training",
    )
    record_trial_plan(client, parent.run_id, plan)
    _store_trial_plan(ctx, study_id, plan)
    check_cluster_fits(plan)
    if spec.kind == "grid" and spec.sequential is not None:
        results = _run_sequential_grid(spec, plan, ctx, base, metric=metric, client=client, parent=parent)
    elif spec.kind == "grid":
        variants = configs.variants(plan.seeds_per_trial)
        results = _run_variants(
            spec, plan, ctx, base, variants, phase=GRID_PHASE, metric=metric, client=client, parent=parent
        )
    else:
        results = _run_compare(spec, plan, ctx, base, metric=metric, client=client, parent=parent)
    # Trials lost with an earlier, killed driver before their first epoch have no run id in their rows yet.
    fill_missing_run_ids(client, parent.experiment_id, engine=ctx.engine, study_id=study_id)
    # "Succeeded" means every planned trial is stored: what Tune or MLflow hold and the store lacks is
    # recovered, else the study fails naming what is missing (a sequential study's looks are stored here).
    ensure_complete(
        study_id, spec, ctx.engine, results=results, client=client, experiment_id=parent.experiment_id
    )


def checkpoint_interval_s(spec: StudySpec, settings: WorkerSettings) -> float:
    """Seconds of training between a trial's checkpoints: the study budget's, else the service's
    (NORMLAB_CHECKPOINT_EVERY_S)."""
    if spec.budget.checkpoint_every_s is not None:
        return spec.budget.checkpoint_every_s
    return settings.checkpoint_every_s


def _with_retries(action, *, what: str, attempts: int = 6, first_delay_s: float = 2.0):
    """Ride out a short outage (a tracking server restarting) before failing the whole study."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:
            if attempt == attempts:
                raise RuntimeError(f"could not {what} after {attempts} attempts: {exc}") from exc
            log.warning(
                "could not %s (attempt %d/%d): %s; retrying in %.0f s", what, attempt, attempts, exc, delay
            )
            time.sleep(delay)
            delay *= 2


def check_cluster_fits(plan: TrialPlan) -> None:
    """Fail at once, with the fix, when no node can hold one trial (Tune would wait forever)."""
    need = {"CPU": plan.cpu, "GPU": plan.gpu}
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    if any(all(have.get(k, 0.0) >= v for k, v in need.items() if v > 0) for have in nodes):
        return
    largest = {k: max((have.get(k, 0.0) for have in nodes), default=0.0) for k in need}
    raise RuntimeError(
        f"no Ray node can run a trial that needs {need['CPU']:g} CPU and {need['GPU']:g} GPU "
        f"(largest node: {largest['CPU']:g} CPU, {largest['GPU']:g} GPU); lower `resources` in the spec "
        "or add a node that has them"
    )


def plan_study_trials(
    spec: StudySpec,
    base: dict[str, Any],
    *,
    choose_settings: bool = False,
    cache_path: Path | None = None,
    kept: ThroughputChoice | None = None,
) -> TrialPlan:
    """The study's TrialPlan (workers.trials.plan), measuring a trial on a GPU node when `gpu` is auto.

    `choose_settings` (workers.driver.throughput.measures_settings): the spec leaves seeds per trial and
    compile to a measurement, which runs on a GPU (cached in `cache_path`); `kept`: the choice an earlier
    driver of this study made, which a restarted driver keeps instead of choosing again."""

    def measure_peak(seeds_per_trial: int) -> tuple[int, int]:
        probes = [{**base, **probe} for probe in StudyTrialConfigs(spec).probes(seeds_per_trial)]
        log.info("measuring the GPU memory of %d probe trial(s) for resources.gpu: auto", len(probes))
        task = ray.remote(num_gpus=1, num_cpus=spec.resources.cpu)(measure_probe_memory)
        peaks = ray.get([task.remote(config) for config in probes])
        return max(peak for peak, _ in peaks), min(device for _, device in peaks)

    def choose(trials_per_gpu: list[int], gpu_share: float) -> ThroughputChoice | None:
        if kept is not None:
            log.info("keeping the setting this study's first driver chose: %s", kept.describe())
            return kept
        assert cache_path is not None, "a measured choice needs the cache's path"
        return choose_by_throughput(
            spec, base, trials_per_gpu=trials_per_gpu, gpu_share=gpu_share, cache=ThroughputCache(cache_path)
        )

    return plan_trials(
        cpu=spec.resources.cpu,
        gpu=spec.resources.gpu,
        # A plugin's layer torch.func cannot stack trains one seed per trial (the spec refuses more).
        seeds_per_trial=1 if spec.unstackable_methods() else spec.resources.seeds_per_trial,
        compile_mode=spec.budget.compile,
        num_seeds=len(spec.seeds),
        cluster_gpus=float(ray.cluster_resources().get("GPU", 0.0)),
        measure_peak=measure_peak,
        choose=choose if (choose_settings or kept is not None) else None,
    )


def kept_choice(stored_plan: dict[str, Any] | None) -> ThroughputChoice | None:
    """The measured choice an earlier driver of the study recorded (None: none was measured or recorded)."""
    throughput = (stored_plan or {}).get("throughput")
    if not throughput:
        return None
    try:
        return replace(ThroughputChoice.from_dict(throughput), source="kept")
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("the stored trial plan's throughput choice is unreadable (%s); choosing again", exc)
        return None


def _stored_planning(ctx: DriverContext, study_id: str) -> StoredTrialPlan:
    with session_scope(ctx.engine, readonly=True) as session:
        return study_trial_plan(session, study_id=study_id)


def _store_trial_plan(ctx: DriverContext, study_id: str, plan: TrialPlan) -> None:
    """The resolved plan in the study's row (what its page shows, what a restarted driver keeps); a failure
    to write it is logged, never the study's failure."""
    try:
        with session_scope(ctx.engine) as session:
            set_study_trial_plan(session, study_id=study_id, plan=plan.to_dict())
    except Exception as exc:
        log.warning("could not store the trial plan of study %s: %s", study_id, exc)


def measure_probe_memory(config: dict[str, Any]) -> tuple[int, int]:
    """Runs on a GPU node (a Ray task): (peak bytes, device bytes) of a few steps of the probe trial."""
    from workers.training import TrainConfig
    from workers.training.memory_probe import measure_trial_memory

    seeds = trial_seeds(config)
    single = {k: v for k, v in config.items() if k not in ORCHESTRATION_KEYS}
    memory = measure_trial_memory(TrainConfig.from_trial_config(single, device="cuda"), seeds)
    return memory.peak_bytes, memory.device_bytes


THROUGHPUT_ARTIFACT = "trial_plan/throughput.json"


def record_trial_plan(client: MlflowClient, parent_run_id: str, plan: TrialPlan) -> None:
    """The resolved resources on the study's MLflow parent run (best-effort: tracking never fails a study):
    tag normlab.trial_plan, and where a measurement chose them, tag normlab.throughput_choice (the choice
    in words), tags normlab.seeds_per_trial / normlab.compile / normlab.trials_per_gpu, and every
    candidate's measured samples/s in the artifact trial_plan/throughput.json."""
    try:
        client.set_tag(parent_run_id, "normlab.trial_plan", plan.describe())
        choice = plan.throughput
        if choice is None:
            return
        tags = {
            "normlab.throughput_choice": choice.describe(),
            "normlab.seeds_per_trial": str(choice.setting.seeds_per_trial),
            "normlab.compile": choice.setting.compile_mode,
            "normlab.trials_per_gpu": str(choice.setting.trials_per_gpu),
        }
        client.log_batch(parent_run_id, tags=[RunTag(k, v) for k, v in tags.items()], synchronous=True)
        client.log_dict(parent_run_id, choice.to_dict(), THROUGHPUT_ARTIFACT)
    except Exception as exc:
        log.warning("could not tag the MLflow parent run with the trial plan: %s", exc)


def _trainable(plan: TrialPlan):
    """Every trial of a study asks for the same resources, so Tune (reuse_actors=True in every TuneConfig)
    runs the next trial in the process the last one finished in: its imports, loaded datasets (memoised per
    process by workers.data.get_dataset) and warmed-up torch stay, and a trial starts in ~0.1 s instead of
    the ~6 s of a fresh process on 2 CPU cores (benchmarks/bench_orchestration.py)."""
    return tune.with_resources(study_trial, {"cpu": plan.cpu, "gpu": plan.gpu})


def _tuner(path: Path, trainable, **kwargs) -> tune.Tuner:
    """A new Tuner, or the interrupted one restored from its storage (driver restarted mid-phase)."""
    # Tune writes tuner.pkl at once but its experiment state only from the first step on: a driver that
    # died in between left nothing to restore (and Tuner.restore would fail), so that experiment starts anew.
    if tune.Tuner.can_restore(str(path)) and any(path.glob("experiment_state-*.json")):
        log.info("resuming the Tune experiment at %s", path)
        return tune.Tuner.restore(
            str(path), trainable, resume_errored=True, param_space=kwargs.get("param_space")
        )
    return tune.Tuner(trainable, **kwargs)


def _run_compare(
    spec: StudySpec, plan: TrialPlan, ctx: DriverContext, base: dict[str, Any], *, metric, client, parent
) -> list[Any]:
    """Phase 1 (tune) and phase 2 (final) in ONE Tune experiment (workers.driver.method_search): each method
    is tuned by its own seeded TPE sampler on the tune seed (ASHA rungs per method), and once its tuning
    trials have ended its best knobs run on every final seed, on the test split. A method without searchable
    knobs goes straight to its final trials."""
    configs = StudyTrialConfigs(spec)
    spaces = {m: spec.search_space_for(m) for m in spec.methods}
    tuned = configs.tuned_methods
    import optuna

    search = StudySearch(
        methods=spec.methods,
        spaces={m: to_tune_space(spaces[m]) for m in tuned},
        num_samples={m: spec.num_samples_for(m) for m in tuned},
        # An untuned method's knobs are all Fixed (has_searchable_knobs).
        fixed_knobs={
            m: {k: d.value for k, d in spaces[m].items() if isinstance(d, Fixed)}
            for m in spec.methods
            if m not in tuned
        },
        tune_config=configs.tuning,
        finals=final_schedule(
            spec, plan, ctx, study_id=base.get(Key.STUDY_ID, ""), metric=metric, parent=parent
        ),
        metric="objective",
        mode=metric.mode,
        make_sampler=lambda: optuna.samplers.TPESampler(seed=spec.tune_seed),
    )
    scheduler = None
    if configs.early_stopping:
        scheduler = MethodScheduler(
            {
                m: ASHAScheduler(
                    time_attr="epoch",
                    max_t=spec.scheduler.max_t or spec.budget.epochs,
                    grace_period=spec.scheduler.grace_period,
                    reduction_factor=spec.scheduler.reduction_factor,
                )
                for m in tuned
            }
        )
    name = "study"
    tuner = _tuner(
        ctx.results_dir / name,
        _trainable(plan),
        param_space=dict(base),
        tune_config=tune.TuneConfig(
            metric="objective",
            mode=metric.mode,
            num_samples=search.total_trials,
            search_alg=search,
            scheduler=scheduler,
            # As many trials in flight as the cluster runs at once: every slot's process starts together,
            # and TPE still learns from finished trials (Tune's default with a searcher is one pending trial).
            max_concurrent_trials=concurrent_trials(plan),
            reuse_actors=True,
        ),
        run_config=_run_config(
            spec,
            ctx,
            name,
            metric_key={TUNE_PHASE: "objective", FINAL_PHASE: f"test_{metric.name}"},
            parent=parent,
        ),
    )
    grid = tuner.fit()
    results = [grid[i] for i in range(len(grid))]
    finalize_mlflow_runs(results, client, parent.experiment_id, engine=ctx.engine)
    return results  # the looks of a sequential design are stored once the store is complete


def final_schedule(
    spec: StudySpec,
    plan: TrialPlan,
    ctx: DriverContext,
    *,
    study_id: str,
    metric: MetricInfo,
    parent: ParentRun,
) -> FinalSchedule:
    """Every method on every seed, or a sequential design's looks (workers.driver.final_schedule)."""
    if spec.sequential is None:
        return FixedFinals(StudyTrialConfigs(spec).finals(plan.seeds_per_trial), spec.methods)
    return SequentialFinals(
        monitor_for(spec, higher_is_better=metric.higher_is_better),
        final_config=StudyTrialConfigs.final_for if spec.kind != "grid" else grid_seed_fields,
        seeds_per_trial=plan.seeds_per_trial,
        metric_key=f"test_{metric.name}",
        sink=StoredLooks(
            database_url=ctx.database_url,
            study_id=study_id,
            tracking_uri=ctx.mlflow_tracking_uri,
            parent_run_id=parent.run_id,
        ),
    )


def _run_sequential_grid(
    spec: StudySpec, plan: TrialPlan, ctx: DriverContext, base: dict[str, Any], *, metric, client, parent
) -> list[Any]:
    """A grid under a sequential design (workers.driver.arm_search): every point trains the first look's
    seeds, then only the points of the pairs still open train the next look's."""
    finals = final_schedule(
        spec, plan, ctx, study_id=base.get(Key.STUDY_ID, ""), metric=metric, parent=parent
    )
    assert isinstance(finals, SequentialFinals)
    search = ArmSearch(
        arms={
            spec.arm_of(m, point.label): {Key.METHOD: m, Key.GROUP: point.label, Key.KNOBS: dict(point.knobs)}
            for m in spec.methods
            for point in spec.grid_points(m)
        },
        finals=finals,
        # What every trial reports each epoch (Tune checks a searcher's metric in every result); the looks
        # read the test metric of each trial's last result themselves.
        metric="objective",
        mode=metric.mode,
    )
    name = GRID_PHASE
    tuner = _tuner(
        ctx.results_dir / name,
        _trainable(plan),
        param_space=dict(base),
        tune_config=tune.TuneConfig(
            num_samples=search.total_trials,
            search_alg=search,
            max_concurrent_trials=concurrent_trials(plan),
            reuse_actors=True,
        ),
        run_config=_run_config(spec, ctx, name, metric_key=f"test_{metric.name}", parent=parent),
    )
    grid = tuner.fit()
    results = [grid[i] for i in range(len(grid))]
    finalize_mlflow_runs(results, client, parent.experiment_id, engine=ctx.engine)
    return results  # the looks are stored once the store is complete (workers.driver.completeness)


def concurrent_trials(plan: TrialPlan) -> int | None:
    """Trials the cluster runs at once at the spec's per-trial resources (None when Ray is not up)."""
    if not ray.is_initialized():
        return None
    total = ray.cluster_resources()
    fits = [
        math.floor(total.get(k, 0.0) / need + 1e-9)  # 0.3 / 0.1 is 2.999...: three trials fit
        for k, need in (("CPU", plan.cpu), ("GPU", plan.gpu))
        if need > 0
    ]
    return max(1, min(fits)) if fits else None


def _run_variants(
    spec: StudySpec, plan: TrialPlan, ctx, base, variants, *, phase: str, metric, client, parent
) -> list[Any]:
    """Final or grid phase: every variant (method, knobs, seed[, group]) runs to the end on the test split."""
    param_space = {**base, **StudyTrialConfigs.variant_fields(phase), Key.VARIANT: tune.grid_search(variants)}
    name = f"{phase}"
    tuner = _tuner(
        ctx.results_dir / name,
        _trainable(plan),
        param_space=param_space,
        tune_config=tune.TuneConfig(num_samples=1, reuse_actors=True),
        run_config=_run_config(spec, ctx, name, metric_key=f"test_{metric.name}", parent=parent),
    )
    grid = tuner.fit()
    results = [grid[i] for i in range(len(grid))]
    finalize_mlflow_runs(results, client, parent.experiment_id, engine=ctx.engine)
    return results


def _run_config(
    spec: StudySpec, ctx: DriverContext, name: str, *, metric_key: str | dict[str, str], parent
) -> tune.RunConfig:
    return tune.RunConfig(
        name=name,
        storage_path=str(ctx.results_dir),
        failure_config=tune.FailureConfig(max_failures=spec.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=study_callbacks(
            ctx.database_url,
            metric_key=metric_key,
            tracking_uri=ctx.mlflow_tracking_uri,
            experiment_id=parent.experiment_id,
        ),
        verbose=1,
    )
