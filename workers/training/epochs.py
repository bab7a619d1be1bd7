"""The epochs every training run goes through, shared by TrainingRun (one seed) and SeedBatchedRun (k
stacked seeds), so both report the same keys in the same order, decide the AutoNorm-S freeze at the same
point of an epoch, and settle, checkpoint and report on one schedule.

A run implements `EpochSteps`: what it does for each of its seeds (k = 1 for TrainingRun): train one
epoch's optimizer steps, evaluate a dataset, read the epoch's gate statistics, observe a freeze decision.
`epoch_zero` and `train_epoch` put one epoch together from those steps; `run_epochs` drives a run over
its epochs (resume or epoch 0, then train, settle, checkpoint when due, report).

What stays each run's own, because it is where the two differ: the optimizer steps (one module's backward,
or vmap(grad) over k stacked tensors with per-seed clipping and per-seed frozen selectors), how a seed's
gates are read in evaluation (the module's norms, or the stacked forward's per-seed probabilities), what
a freeze changes (the module's requires_grad, or the stacked step's per-seed masks), and how a seed's
checkpoint state is cut from the run and put back (a whole optimizer, or a slice of the stacked one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import Dataset

from workers.training.batches import iterate_batches
from workers.training.checkpoint import CheckpointSchedule, load_checkpoint, save_checkpoint
from workers.training.config import TrainConfig
from workers.training.metrics import layer_entropies
from workers.training.run_parts import test_metrics, validation_metrics

if TYPE_CHECKING:
    from workers.data.bundle import DatasetBundle

__all__ = [
    "RANK_EXAMPLE_SIZE",
    "EpochRun",
    "EpochSteps",
    "SeedEval",
    "epoch_zero",
    "run_epochs",
    "test_metrics_per_seed",
    "train_epoch",
]

RANK_EXAMPLE_SIZE = 8  # inputs fed to models.rank.init_rank_report: enough tokens, cheap Jacobians

# One seed's evaluation of one dataset: (the dataset's metric, the eval-mode gate statistics).
SeedEval = tuple[float, dict[str, float]]

R_co = TypeVar("R_co", covariant=True)
R = TypeVar("R")


class EpochSteps(Protocol):
    """What a run does for each of its `num_seeds` seeds; every list holds one entry per seed, in order."""

    cfg: TrainConfig
    bundle: DatasetBundle
    device: torch.device
    epoch: int  # epochs trained; train_epoch counts the next one before it trains it
    scheduler: LRScheduler  # one schedule for all seeds: the same lr in every seed's report

    @property
    def num_seeds(self) -> int: ...

    @property
    def histories(self) -> list[list[dict[str, Any]]]:
        """Each seed's reports so far; epoch_zero and train_epoch append to them."""
        ...

    def seed_model(self, index: int) -> nn.Module:
        """A module with seed `index`'s current weights (for the init ranks)."""
        ...

    def train_seeds(self) -> tuple[list[float], int]:
        """One epoch of optimizer steps: each seed's mean training loss, and how many samples each trained on."""
        ...

    def evaluate_seeds(self, dataset: Dataset) -> list[SeedEval]: ...

    def train_gate_metrics(self) -> list[dict[str, float]]:
        """The gates each seed trained with this epoch (train_gate_entropy_*)."""
        ...

    def selector_grad_metrics(self) -> list[dict[str, float]]:
        """selector_grad_var of each seed's epoch (empty without trained selectors)."""
        ...

    @property
    def freezes(self) -> bool:
        """Whether the method has the AutoNorm-S freeze schedule (then every seed has a freeze controller)."""
        ...

    def observe_freeze(self, index: int, entropies: list[float]) -> None:
        """Hand seed `index`'s freeze controller this epoch's per-layer entropies, and apply what it decides."""
        ...

    def freeze_metrics(self, index: int) -> dict[str, int]: ...


class EpochRun(Protocol[R_co]):
    """What `run_epochs` drives: a run whose reports are R (a metrics dict, or a list of k of them)."""

    @property
    def epoch(self) -> int: ...

    def initial_report(self) -> R_co: ...

    def train_one_epoch(self) -> R_co: ...

    def seed_states(self) -> list[dict[str, Any]]:
        """One checkpoint state per seed, each loadable by a single-seed TrainingRun of that seed."""
        ...

    def load_seed_states(self, states: Sequence[Mapping[str, Any]]) -> None: ...


def run_epochs(
    run: EpochRun[R],
    *,
    epochs: int,
    checkpoint_dir: Path,
    checkpoint_files: Sequence[Path],
    resume: bool,
    report: Callable[[R, Path | None], None] | None,
    settle: Callable[[], None] | None,
    start_schedule: Callable[[], CheckpointSchedule],
) -> None:
    """Train `run` up to epoch `epochs` (see run_training for the contract every run keeps).

    With `resume` and a checkpoint in every one of `checkpoint_files` (one per seed), the run continues
    after their epoch; otherwise it reports epoch 0 first, without a checkpoint. Every epoch then ends with
    `settle()`, the checkpoint files written when the schedule says so, and `report(metrics,
    checkpoint_dir or None)`. The schedule is started by `start_schedule()` once the run is ready to train,
    so its interval counts training time only.
    """
    found = [load_checkpoint(path) for path in checkpoint_files] if resume else []
    states = [state for state in found if state is not None]
    if states and len(states) == len(checkpoint_files):
        run.load_seed_states(states)
    else:
        first = run.initial_report()
        if report is not None:
            report(first, None)
    schedule = start_schedule()
    while run.epoch < epochs:
        metrics = run.train_one_epoch()
        if settle is not None:
            settle()  # the previous report was taken: its checkpoint may now be overwritten
        written = schedule.due(run.epoch, epochs)
        if written:
            for path, state in zip(checkpoint_files, run.seed_states(), strict=True):
                save_checkpoint(path, state)
        if report is not None:
            report(metrics, checkpoint_dir if written else None)


def epoch_zero(run: EpochSteps) -> list[dict[str, Any]]:
    """Epoch 0 of every seed: the init effective ranks of its model and its untrained validation metric
    (so every report has `objective`)."""
    from models.rank import init_rank_report

    started, cpu_started = time.perf_counter(), time.thread_time()
    example, _ = next(iterate_batches(run.bundle.train, RANK_EXAMPLE_SIZE))
    example = example.to(run.device)
    ranks = [init_rank_report(run.seed_model(i), example) for i in range(run.num_seeds)]
    results = run.evaluate_seeds(run.bundle.val)
    elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - cpu_started
    reports = []
    for i, ((metric, gates), seed_ranks) in enumerate(zip(results, ranks, strict=True)):
        metrics: dict[str, Any] = {
            "epoch": 0,
            **validation_metrics(run.bundle.metric, metric),
            **gates,
            **run.freeze_metrics(i),
            **{key: float(value) for key, value in seed_ranks.items()},
            "epoch_time_s": elapsed,
            "epoch_cpu_s": elapsed_cpu,
        }
        run.histories[i].append(metrics)
        reports.append(metrics)
    return reports


def train_epoch(run: EpochSteps) -> list[dict[str, Any]]:
    """The next epoch of every seed: its optimizer steps, the validation metric, the freeze decision (read
    from this epoch's gates), and after the last epoch of the final phase the test metrics. One metrics
    dict per seed, appended to its history, every seed's with the same keys in the same order."""
    run.epoch += 1
    cfg = run.cfg
    # Wall and CPU time of the epoch: the CPU time of this (the training) thread is the epoch's whole
    # compute when torch runs on one thread, whatever else the machine's cores were doing meanwhile.
    started, cpu_started = time.perf_counter(), time.thread_time()
    train_losses, samples = run.train_seeds()
    train_time = time.perf_counter() - started
    results = run.evaluate_seeds(run.bundle.val)
    train_gates = run.train_gate_metrics()
    selector_grads = run.selector_grad_metrics()
    if run.freezes:
        for i, (_, gates) in enumerate(results):
            entropies = layer_entropies({**gates, **train_gates[i]}, cfg.freeze_signal)
            if not entropies:
                raise RuntimeError(f"method {cfg.method!r} freezes gates but the model reports none")
            run.observe_freeze(i, entropies)
    last_of_final = cfg.eval_split == "test" and run.epoch == cfg.epochs
    tests = test_metrics_per_seed(run) if last_of_final else [{} for _ in range(run.num_seeds)]
    lr = run.scheduler.get_last_lr()[0]
    elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - cpu_started
    reports = []
    for i, (metric, gates) in enumerate(results):
        metrics: dict[str, Any] = {
            "epoch": run.epoch,
            "train_loss": train_losses[i],
            **validation_metrics(run.bundle.metric, metric),
            **gates,
            **train_gates[i],
            **selector_grads[i],
            **run.freeze_metrics(i),
            "lr": lr,
            **tests[i],
            "epoch_time_s": elapsed,
            "epoch_cpu_s": elapsed_cpu,
            # Per seed: k stacked seeds together process k times as many samples in the same wall time.
            "samples_per_s": samples / train_time if train_time > 0 else math.nan,
        }
        run.histories[i].append(metrics)
        reports.append(metrics)
    return reports


def test_metrics_per_seed(run: EpochSteps) -> list[dict[str, float]]:
    """Per seed: test_<metric>, and per corruption set test_<metric>_<name> plus their mean."""
    tests = [metric for metric, _ in run.evaluate_seeds(run.bundle.test)]
    corrupted: list[dict[str, float]] = [{} for _ in range(run.num_seeds)]
    for key, dataset in sorted(run.bundle.eval_sets.items()):
        for i, (metric, _) in enumerate(run.evaluate_seeds(dataset)):
            corrupted[i][key] = metric
    return [
        test_metrics(run.bundle.metric, test, values) for test, values in zip(tests, corrupted, strict=True)
    ]
