"""The training loop every trial runs: seeded, checkpointed (every epoch, or on a time interval), resumable
bit for bit on CPU."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from workers.training.augment import build_augmenter
from workers.training.batches import device_resident, iterate_batches
from workers.training.checkpoint import CHECKPOINT_FILE, CheckpointSchedule, load_checkpoint, save_checkpoint
from workers.training.compiled import CompiledForward
from workers.training.config import RESUME_INSENSITIVE_FIELDS, TrainConfig, model_config
from workers.training.metrics import (
    GateStats,
    MetricAccumulator,
    SelectorGradVariance,
    TaskLoss,
    TrainGateEntropy,
    layer_entropies,
)
from workers.training.optim import build_optimizer
from workers.training.run_parts import (
    build_freezer,
    build_mixer,
    build_schedule,
    load_bundle,
    progress_bar,
    test_metrics,
    validation_metrics,
)
from workers.training.seeding import capture_rng_state, restore_rng_state, seed_everything

__all__ = ["CHECKPOINT_FORMAT", "ReportFn", "TrainingRun", "resolve_device", "run_training"]

# (metrics of one epoch, directory holding that epoch's checkpoint or None for the epoch-0 report)
ReportFn = Callable[[dict[str, Any], "Path | None"], None]

CHECKPOINT_FORMAT = 1
RANK_EXAMPLE_SIZE = 8  # inputs fed to models.rank.init_rank_report: enough tokens, cheap Jacobians


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {name!r} requested but CUDA is not available")
    return device


def run_training(
    cfg: TrainConfig,
    *,
    checkpoint_dir: Path | str,
    resume: bool = True,
    report: ReportFn | None = None,
    settle: Callable[[], None] | None = None,
    checkpoint_every_s: float = 0.0,
) -> dict[str, Any]:
    """Train `cfg` to completion and return the last epoch's metrics (with test metrics in the final phase).

    Every epoch ends with: evaluation, the AutoNorm-S freeze decision, `settle()`, an atomic checkpoint in
    `checkpoint_dir` when one is due, then `report(metrics, checkpoint_dir or None)`. Before epoch 1 comes
    one `report(epoch-0 metrics, None)` with the untrained validation metric and the init_* ranks. A
    `report` that returns before it was taken passes `settle`, which waits until it was: nothing of the
    next epoch is written or reported before. Checkpoints follow `CheckpointSchedule(checkpoint_every_s)`:
    the last epoch always, every epoch with the default 0.
    With `resume` and a checkpoint present, training continues after the checkpointed epoch and ends with
    exactly the metrics an uninterrupted run would have produced (on CPU, same thread count).
    """
    run = TrainingRun(cfg)
    checkpoint_path = Path(checkpoint_dir) / CHECKPOINT_FILE
    state = load_checkpoint(checkpoint_path) if resume else None
    if state is not None:
        run.load_state_dict(state)
    else:
        metrics = run.initial_report()
        if report is not None:
            report(metrics, None)
    schedule = CheckpointSchedule(checkpoint_every_s)
    while run.epoch < cfg.epochs:
        metrics = run.train_one_epoch()
        if settle is not None:
            settle()
        written = schedule.due(run.epoch, cfg.epochs)
        if written:
            save_checkpoint(checkpoint_path, run.state_dict())
        if report is not None:
            report(metrics, checkpoint_path.parent if written else None)
    return dict(run.history[-1])


class TrainingRun:
    """The state of one training run (model, optimizer, schedule, freeze controller, RNGs, history)."""

    def __init__(self, cfg: TrainConfig) -> None:
        # Imported here so workers.training stays importable (and testable) without the heavy registries.
        from models import build_model
        from models.methods import norm_for_method
        from models.norms import gated_norms, selector_parameters

        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.bundle = load_bundle(cfg)
        # Seed after loading the data so init does not depend on whether the dataset was cached.
        seed_everything(cfg.seed)
        choice = norm_for_method(cfg.method)
        fields = model_config(cfg, norm_kind=choice.kind, model_fields=self.bundle.model_fields)
        self.model: nn.Module = build_model(cfg.model or self.bundle.default_model, fields).to(self.device)
        # Training forward only (budget.compile); evaluation and checkpoints use the eager module.
        self.train_forward = CompiledForward(self.model, cfg.compile, self.device)
        self.optimizer = build_optimizer(self.model, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.steps_per_epoch, self.scheduler = build_schedule(self.optimizer, cfg, len(self.bundle.train))
        self.freezer = build_freezer(cfg, choice.gate_freeze)
        self.gated_layers = len(gated_norms(self.model))
        self.train_gates = TrainGateEntropy([norm for _, norm in gated_norms(self.model)])
        self.selector_grads = SelectorGradVariance(selector_parameters(self.model))
        self.data_generator = torch.Generator().manual_seed(cfg.seed)
        # Where training batches are gathered: the split itself, or its copy on the GPU (same values).
        self.train_split = device_resident(self.bundle.train, self.device)
        self.mixer = build_mixer(cfg, self.bundle, cfg.seed)
        # Training batches only; its own generator (seeded from cfg.seed) is checkpointed with the run.
        self.augmenter = build_augmenter(
            cfg.augment, self.bundle, model=cfg.model or self.bundle.default_model, seed=cfg.seed
        )
        self.loss_fn = TaskLoss(
            self.bundle.task, label_smoothing=cfg.label_smoothing, ignore_index=self.bundle.ignore_index
        )
        self.epoch = 0
        self.history: list[dict[str, Any]] = []

    # ----- epochs -------------------------------------------------------------------------------------

    def initial_report(self) -> dict[str, Any]:
        """Epoch 0: init effective ranks and the untrained validation metric (so every report has `objective`)."""
        from models.rank import init_rank_report

        started, cpu_started = time.perf_counter(), time.thread_time()
        example, _ = next(iterate_batches(self.bundle.train, RANK_EXAMPLE_SIZE))
        example = example.to(self.device)
        ranks = init_rank_report(self.model, example)
        metric, gates = self.evaluate(self.bundle.val)
        metrics: dict[str, Any] = {"epoch": 0, **validation_metrics(self.bundle.metric, metric), **gates}
        metrics.update(self._freeze_metrics())
        metrics.update({k: float(v) for k, v in ranks.items()})
        metrics["epoch_time_s"] = time.perf_counter() - started
        metrics["epoch_cpu_s"] = time.thread_time() - cpu_started
        self.history.append(metrics)
        return metrics

    def train_one_epoch(self) -> dict[str, Any]:
        self.epoch += 1
        cfg = self.cfg
        # Wall and CPU time of the epoch: the CPU time of this (the training) thread is the epoch's whole
        # compute when torch runs on one thread, whatever else the machine's cores were doing meanwhile.
        started, cpu_started = time.perf_counter(), time.thread_time()
        train_loss, samples = self._train_steps()
        train_time = time.perf_counter() - started
        metric, gates = self.evaluate(self.bundle.val)
        train_gates = self.train_gates.compute()
        selector_grads = self.selector_grads.compute()
        if self.freezer is not None:
            entropies = layer_entropies({**gates, **train_gates}, cfg.freeze_signal)
            if not entropies:
                raise RuntimeError(f"method {cfg.method!r} freezes gates but the model reports none")
            self.freezer.observe(self.epoch, entropies, self.model)
        metrics: dict[str, Any] = {
            "epoch": self.epoch,
            "train_loss": train_loss,
            **validation_metrics(self.bundle.metric, metric),
            **gates,
            **train_gates,
            **selector_grads,
            **self._freeze_metrics(),
            "lr": self.scheduler.get_last_lr()[0],
        }
        if cfg.eval_split == "test" and self.epoch == cfg.epochs:
            metrics.update(self.final_test_metrics())
        metrics["epoch_time_s"] = time.perf_counter() - started
        metrics["epoch_cpu_s"] = time.thread_time() - cpu_started
        metrics["samples_per_s"] = samples / train_time if train_time > 0 else math.nan
        self.history.append(metrics)
        return metrics

    def final_test_metrics(self) -> dict[str, float]:
        """test_<metric>, and per corruption set test_<metric>_<name> plus their mean."""
        corrupted = {key: self.evaluate(ds)[0] for key, ds in sorted(self.bundle.eval_sets.items())}
        return test_metrics(self.bundle.metric, self.evaluate(self.bundle.test)[0], corrupted)

    def _train_steps(self) -> tuple[float, int]:
        cfg, model = self.cfg, self.model
        model.train()
        order = torch.randperm(len(self.bundle.train), generator=self.data_generator)
        split = self.train_split
        if isinstance(split, torch.utils.data.TensorDataset):
            order = order.to(split.tensors[0].device)  # one copy an epoch, not an index copy per step
        loss_sum = torch.zeros((), device=self.device)  # summed on device: one host sync per epoch
        self.train_gates.reset()
        self.selector_grads.reset()
        samples = 0
        bar = progress_bar(cfg, self.steps_per_epoch, f"epoch {self.epoch}/{cfg.epochs}")
        try:
            for step, (x, y) in enumerate(iterate_batches(split, cfg.batch_size, order=order)):
                if step >= self.steps_per_epoch:
                    break
                x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
                if self.augmenter is not None:
                    x = self.augmenter(x)
                if self.mixer is not None:
                    x, y = self.mixer(x, y)
                with self._autocast():
                    output = self.train_forward(x)
                self.train_gates.update()  # the noise-free gates this batch trained with
                loss = self.loss_fn(output, y)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.selector_grads.update()  # the loss's own selector gradient, before clipping
                if cfg.grad_clip is not None and cfg.grad_clip > 0:
                    nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                self.optimizer.step()
                self.scheduler.step()
                loss_sum += loss.detach() * x.shape[0]
                samples += x.shape[0]
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        return float(loss_sum) / max(samples, 1), samples

    @torch.no_grad()
    def evaluate(self, dataset: torch.utils.data.Dataset) -> tuple[float, dict[str, float]]:
        """The dataset's metric on `dataset` and the gate statistics averaged over it (eval mode: noise-free)."""
        from models.norms import gate_summary

        self.model.eval()
        accumulator = MetricAccumulator(
            self.bundle.metric, target_std=self.bundle.target_std, ignore_index=self.bundle.ignore_index
        )
        gates = GateStats()
        for x, y in iterate_batches(dataset, self.cfg.eval_batch_size):
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            with self._autocast():
                output = self.model(x)
            accumulator.update(output, y)
            gates.update(gate_summary(self.model), x.shape[0])
        self.model.train()
        return accumulator.compute(), gates.compute()

    # ----- checkpoint state ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "epoch": self.epoch,
            "config": self.cfg.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "freezer": self.freezer.state_dict() if self.freezer is not None else None,
            "mixer": self.mixer.state_dict() if self.mixer is not None else None,
            "augmenter": self.augmenter.state_dict() if self.augmenter is not None else None,
            "rng": capture_rng_state(self.data_generator),
            "history": self.history,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"unsupported checkpoint format {state.get('format')!r}")
        _check_same_run(state["config"], self.cfg.to_dict())
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.freezer is not None:
            self.freezer.load_state_dict(state["freezer"])
            self.freezer.apply(self.model)
        if self.mixer is not None:
            self.mixer.load_state_dict(state["mixer"])
        if self.augmenter is not None:
            self.augmenter.load_state_dict(state.get("augmenter"))
        restore_rng_state(state["rng"], self.data_generator)
        self.epoch = int(state["epoch"])
        self.history = list(state["history"])

    # ----- helpers ------------------------------------------------------------------------------------

    def _freeze_metrics(self) -> dict[str, int]:
        if self.freezer is None:
            return {"gates_frozen": 0, "freeze_epoch": -1}
        return self.freezer.layer_metrics(self.gated_layers)

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.device.type == "cuda" and self.cfg.amp:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()


def _check_same_run(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Resuming someone else's checkpoint would silently mix two runs: refuse it."""
    differing = sorted(
        key
        for key in set(saved) | set(current)
        if key not in RESUME_INSENSITIVE_FIELDS and saved.get(key) != current.get(key)
    )
    if differing:
        raise ValueError(f"checkpoint belongs to a different run: config differs in {differing}")
