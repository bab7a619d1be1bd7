"""The Ray Tune function trainable: one trial = one training run, reported to Tune and MLflow every epoch.

    tuner = tune.Tuner(tune.with_resources(train_trial, {"cpu": 2, "gpu": 0.5}), param_space=...)

Every epoch is reported; on the trial's checkpoint schedule (its last epoch, and one per `checkpoint_every_s`
of training before it) the loop also writes an atomic checkpoint into a private directory that Tune copies
to its storage on `tune.report(..., checkpoint=...)`. After a restart `tune.get_checkpoint()` brings the last
one back and the loop resumes after the epoch it holds, recomputing any reported since. MLflow gets one child run per trial (get-or-create by trial_key), so
a restarted trial continues the same run. Tracking never holds a trial's end up for long: closing the run
waits for MLflow at most workers.tracking.tracker.CLOSE_TIMEOUT_S, the rest is journaled in the node's spool
(`mlflow_spool_dir`), and each trial process first delivers, in the background, what earlier ones left there.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from studies.trial_config import PER_SEED, Key, checkpoint_every_s_of, one_seed_config
from workers.plugins.activate import activate_extensions
from workers.tracking.delivery import start_spool_delivery
from workers.tracking.tracker import TrialTracker, close_trackers, tracker_from_trial_config
from workers.training import CHECKPOINT_FILE, TrainConfig, load_checkpoint, run_training
from workers.trials.stop import closing_status
from workers.trials.tune_context import report_to_tune, restored_checkpoint, trial_resources

__all__ = [
    "SendFn",
    "run_trial",
    "seed_batch_result",
    "train_trial",
    "trial_device",
    "trial_num_threads",
]

# Where a trial's reports go: (metrics, checkpoint directory or None) -> None; raises SystemExit to stop.
SendFn = Callable[[dict[str, Any], Path | None], None]
# An epoch's reports, one per seed of the trial in its order, and the directory of its checkpoint or None.
SeedReportFn = Callable[[list[dict[str, Any]], Path | None], None]


def train_trial(config: dict[str, Any]) -> None:
    """Ray Tune function trainable (see module docstring); `config` follows the trial config contract."""
    with restored_checkpoint() as restored:
        # _report_to_tune is looked up here, not bound at import: tests replace it to watch the reports.
        run_trial(
            config,
            device=trial_device(),
            num_threads=trial_num_threads(),
            restored=restored,
            send=_report_to_tune,
        )


def run_trial(
    config: dict[str, Any],
    *,
    device: str,
    num_threads: int,
    restored: Path | None,
    send: SendFn,
    settle: Callable[[], None] | None = None,
) -> None:
    """Train one trial (or one seed batch) in this process: `restored` is a checkpoint directory to resume
    from, `send(metrics, checkpoint_dir)` hands every report on (to Tune, or from a warm trial host to the
    Tune trial it serves) and raises SystemExit when the trial is to stop. Epochs are checkpointed on the
    schedule of the config's `checkpoint_every_s` (workers.training.checkpoint.CheckpointSchedule; absent
    or 0: every epoch); the others are reported without a checkpoint directory.

    A `send` that returns before Tune has taken the report (training goes on meanwhile) comes with
    `settle()`, which waits until it has (raising SystemExit to stop). It is called before the next
    checkpoint overwrites the reported one, and before the trial's MLflow runs close: an epoch is logged to
    MLflow only once Tune has let the trial go on past the one before it."""
    activate_extensions(
        config.get(Key.EXTENSIONS)
    )  # a plugin's norms and datasets, before the model and data
    batched = len(config.get(Key.SEED_TRIAL_KEYS) or {}) > 1
    trial = _seed_batch(config, device, num_threads) if batched else _one_seed(config, device, num_threads)
    checkpoint_every_s = checkpoint_every_s_of(config)
    checkpoint_dir = Path(tempfile.mkdtemp(prefix="normlab-trial-"))
    trackers: dict[int, TrialTracker] = {}
    try:
        if restored is not None:
            shutil.copytree(restored, checkpoint_dir, dirs_exist_ok=True)
        _deliver_spool_in_background(config)
        for seed, tracker_config in trial.tracker_configs.items():
            tracker = tracker_from_trial_config(tracker_config)
            if tracker is None:
                continue
            trackers[seed] = tracker
            # Not waited for: the tracker's thread finds or creates the run while the data and model load.
            tracker.start(resolve_timeout_s=0)
            if restored is not None:
                # Epochs queued by the previous attempt may have died with its process: re-send them.
                state = load_checkpoint(trial.checkpoint_file(checkpoint_dir, seed))
                if state is not None:
                    tracker.backfill(state["history"])

        def report(per_seed: list[dict[str, Any]], epoch_checkpoint: Path | None) -> None:
            for seed, metrics in zip(trial.seeds, per_seed, strict=True):
                if seed in trackers:
                    trackers[seed].log_metrics(metrics, step=int(metrics["epoch"]))
            send(trial.result(per_seed), epoch_checkpoint)

        trial.train(checkpoint_dir, report, settle, checkpoint_every_s)
        if settle is not None:
            settle()
    except SystemExit as stop:
        # Tune stops a trial (ASHA, stop criteria) by raising SystemExit(0) inside tune.report; a warm host
        # whose Tune trial is gone raises TrialGone (workers.trials.stop).
        _close(trackers, closing_status(stop))
        raise
    except BaseException:
        _close(trackers, "FAILED")
        raise
    else:
        _close(trackers, "FINISHED")
    finally:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)


@dataclass(frozen=True)
class _Trial:
    """What a trial trains: one seed, or several seeds of one configuration together (a seed batch,
    resources.seeds_per_trial). run_trial gives both one shape: each seed keeps its own MLflow run (its
    single-seed trial key), its own checkpoint file inside the trial's directory and its own metrics."""

    seeds: list[int]
    tracker_configs: dict[int, dict[str, Any]]  # seed -> the trial config that names its MLflow run
    checkpoint_file: Callable[[Path, int], Path]  # (the trial's checkpoint directory, seed) -> its file
    # (checkpoint directory, report, settle, checkpoint_every_s): train to the end, reporting every epoch.
    train: Callable[[Path, SeedReportFn, Callable[[], None] | None, float], None]
    result: Callable[[list[dict[str, Any]]], dict[str, Any]]  # an epoch's reports -> what `send` gets


def _one_seed(config: dict[str, Any], device: str, num_threads: int) -> _Trial:
    """A trial of one seed (TrainingRun): what it sends is that seed's report itself."""
    cfg = TrainConfig.from_trial_config(config, device=device, num_threads=num_threads)

    def train(
        checkpoint_dir: Path, report: SeedReportFn, settle: Callable[[], None] | None, every_s: float
    ) -> None:
        run_training(
            cfg,
            checkpoint_dir=checkpoint_dir,
            resume=True,
            report=lambda metrics, directory: report([metrics], directory),
            settle=settle,
            checkpoint_every_s=every_s,
        )

    return _Trial(
        seeds=[cfg.seed],
        tracker_configs={cfg.seed: config},
        checkpoint_file=lambda directory, _seed: directory / CHECKPOINT_FILE,
        train=train,
        result=lambda per_seed: per_seed[0],
    )


def _seed_batch(config: dict[str, Any], device: str, num_threads: int) -> _Trial:
    """A seed batch (SeedBatchedRun): Tune gets every seed's report under `per_seed` (seed -> that seed's
    report), beside their across-seed mean at the top level, which only Tune's progress display reads."""
    from workers.training.seed_batch import run_seed_batch, seed_checkpoint_path

    keys = {int(seed): str(key) for seed, key in config[Key.SEED_TRIAL_KEYS].items()}
    seeds = list(keys)
    first = one_seed_config(config, seeds[0])
    cfg = TrainConfig.from_trial_config(first, device=device, num_threads=num_threads)

    def train(
        checkpoint_dir: Path, report: SeedReportFn, settle: Callable[[], None] | None, every_s: float
    ) -> None:
        run_seed_batch(
            cfg,
            seeds,
            checkpoint_dir=checkpoint_dir,
            resume=True,
            report=report,
            settle=settle,
            checkpoint_every_s=every_s,
        )

    return _Trial(
        seeds=seeds,
        tracker_configs={seed: one_seed_config(config, seed, key) for seed, key in keys.items()},
        checkpoint_file=seed_checkpoint_path,
        train=train,
        result=functools.partial(seed_batch_result, seeds),
    )


def seed_batch_result(seeds: list[int], per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """One Tune result for a seed batch: every seed's own report under `per_seed` ({"3": {...}}), and at
    the top level the epoch and the across-seed mean of each number every seed reported."""
    shared = set.intersection(*(set(metrics) for metrics in per_seed))
    mean = {
        key: sum(float(metrics[key]) for metrics in per_seed) / len(per_seed)
        for key in sorted(shared)
        if all(_is_number(metrics[key]) for metrics in per_seed)
    }
    mean["epoch"] = int(per_seed[0]["epoch"])
    return {**mean, PER_SEED: {str(seed): dict(m) for seed, m in zip(seeds, per_seed, strict=True)}}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(trackers: dict[int, TrialTracker], status: str) -> None:
    if len(trackers) > 1:
        # One bound for all seeds: closing them one after another would wait the bound once per seed.
        close_trackers(trackers.values(), status)
        return
    for tracker in trackers.values():
        tracker.close(status)


def _deliver_spool_in_background(config: dict[str, Any]) -> None:
    """Start delivering what earlier trial processes on this node left in the spool (MLflow was down)."""
    if config.get(Key.MLFLOW_SPOOL_DIR) and config.get(Key.MLFLOW_TRACKING_URI):
        start_spool_delivery(config[Key.MLFLOW_SPOOL_DIR], str(config[Key.MLFLOW_TRACKING_URI]))


def _report_to_tune(metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
    report_to_tune(metrics, checkpoint_dir)


def trial_device() -> str:
    """ "cuda" when Ray assigned this trial a GPU (and torch sees one), else "cpu".

    A fractional GPU (several trials on one device) also caps this process's share of the GPU memory, so a
    greedy trial cannot starve its neighbours.
    """
    import ray

    gpu_ids = ray.get_gpu_ids() if ray.is_initialized() else []
    if not gpu_ids or not torch.cuda.is_available():
        return "cpu"
    fraction = trial_resources().get("GPU", 1.0)
    if 0.0 < fraction < 1.0:
        torch.cuda.set_per_process_memory_fraction(fraction, 0)  # Ray exposes only the assigned device(s)
    return "cuda"


def trial_num_threads() -> int:
    """torch intra-op threads = the CPUs Ray reserved for the trial (at least one)."""
    return max(1, int(trial_resources().get("CPU", 1)))
