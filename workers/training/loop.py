"""The training loop every trial runs: seeded, checkpointed (every epoch, or on a time interval), resumable
bit for bit on CPU. Its epochs are workers.training.epochs' (the seed-batched run goes through the same
ones); TrainingRun supplies the steps of its one seed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from workers.training.augment import build_augmenter
from workers.training.batches import device_resident, iterate_batches
from workers.training.checkpoint import CHECKPOINT_FILE, CheckpointSchedule
from workers.training.config import RESUME_INSENSITIVE_FIELDS, TrainConfig, model_config
from workers.training.epochs import RANK_EXAMPLE_SIZE as RANK_EXAMPLE_SIZE  # benchmarks read it here
from workers.training.epochs import SeedEval, epoch_zero, run_epochs, test_metrics_per_seed, train_epoch
from workers.training.metrics import (
    GateStats,
    MetricAccumulator,
    SelectorGradVariance,
    TaskLoss,
    TrainGateEntropy,
)
from workers.training.optim import build_optimizer
from workers.training.run_parts import (
    build_freezer,
    build_mixer,
    build_schedule,
    freeze_metrics,
    load_bundle,
    progress_bar,
)
from workers.training.seeding import capture_rng_state, restore_rng_state, seed_everything
from workers.training.whole_step import CompiledTrainStep

__all__ = ["CHECKPOINT_FORMAT", "ReportFn", "TrainingRun", "resolve_device", "run_training"]

# (metrics of one epoch, directory holding that epoch's checkpoint or None for the epoch-0 report)
ReportFn = Callable[[dict[str, Any], "Path | None"], None]

CHECKPOINT_FORMAT = 1


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
    checkpoint_dir = Path(checkpoint_dir)
    run_epochs(
        run,
        epochs=cfg.epochs,
        checkpoint_dir=checkpoint_dir,
        checkpoint_files=[checkpoint_dir / CHECKPOINT_FILE],
        resume=resume,
        report=report,
        settle=settle,
        # CheckpointSchedule is looked up when the run starts: a test swaps in a schedule of its own.
        start_schedule=lambda: CheckpointSchedule(checkpoint_every_s),
    )
    return dict(run.history[-1])


class TrainingRun:
    """The state of one training run (model, optimizer, schedule, freeze controller, RNGs, history), and
    the steps of its one seed that workers.training.epochs makes its epochs of (`EpochSteps`, k = 1)."""

    num_seeds = 1

    def __init__(self, cfg: TrainConfig) -> None:
        # Imported here so workers.training stays importable (and testable) without the heavy registries.
        from models import build_model
        from models.norms import gated_norms, selector_parameters
        from studies.methods import norm_for_method

        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.bundle = load_bundle(cfg)
        # Seed after loading the data so init does not depend on whether the dataset was cached.
        seed_everything(cfg.seed)
        choice = norm_for_method(cfg.method)
        fields = model_config(
            cfg, norm_kind=choice.kind, model_fields=self.bundle.model_fields, method_options=choice.options
        )
        self.model: nn.Module = build_model(cfg.model or self.bundle.default_model, fields).to(self.device)
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
        # budget.compile: the whole training step compiled (workers.training.whole_step); None: the eager
        # step (compile "none", or no compiler found). Evaluation and checkpoints use the eager module.
        self.train_step = self._compiled_step()
        self.epoch = 0
        self.history: list[dict[str, Any]] = []

    def _compiled_step(self) -> CompiledTrainStep | None:
        if self.cfg.compile == "none":
            return None
        step = CompiledTrainStep(
            self.model,
            loss_fn=self.loss_fn,
            optimizer=self.optimizer,
            grad_clip=self.cfg.grad_clip,
            device=self.device,
            amp=self.cfg.amp,
            mode=self.cfg.compile,
        )
        return step if step.active else None

    # ----- epochs -------------------------------------------------------------------------------------

    def initial_report(self) -> dict[str, Any]:
        """Epoch 0: init effective ranks and the untrained validation metric (so every report has `objective`)."""
        return epoch_zero(self)[0]

    def train_one_epoch(self) -> dict[str, Any]:
        return train_epoch(self)[0]

    def final_test_metrics(self) -> dict[str, float]:
        """test_<metric>, and per corruption set test_<metric>_<name> plus their mean."""
        return test_metrics_per_seed(self)[0]

    # ----- the steps of its seed (workers.training.epochs.EpochSteps) -----------------------------------

    @property
    def histories(self) -> list[list[dict[str, Any]]]:
        return [self.history]

    def seed_model(self, index: int) -> nn.Module:
        return self.model

    def evaluate_seeds(self, dataset: torch.utils.data.Dataset) -> list[SeedEval]:
        return [self.evaluate(dataset)]

    def train_gate_metrics(self) -> list[dict[str, float]]:
        return [self.train_gates.compute()]

    def selector_grad_metrics(self) -> list[dict[str, float]]:
        return [self.selector_grads.compute()]

    @property
    def freezes(self) -> bool:
        return self.freezer is not None

    def observe_freeze(self, index: int, entropies: list[float]) -> None:
        # A freeze flips the selectors' requires_grad in the model itself; a compiled step holds them instead.
        froze = self.freezer is not None and self.freezer.observe(self.epoch, entropies, self.model)
        if froze and self.freezer is not None and self.train_step is not None:
            self.train_step.freeze(self.freezer.frozen_layers)

    def freeze_metrics(self, index: int) -> dict[str, int]:
        return freeze_metrics(self.freezer, self.gated_layers)

    def train_seeds(self) -> tuple[list[float], int]:
        """One epoch of optimizer steps of the one model: ([its mean training loss], samples trained on)."""
        cfg, model = self.cfg, self.model
        model.train()
        order = torch.randperm(len(self.bundle.train), generator=self.data_generator)
        split = self.train_split
        if isinstance(split, torch.utils.data.TensorDataset):
            order = order.to(split.tensors[0].device)  # one copy an epoch, not an index copy per step
        loss_sum = torch.zeros((), device=self.device)  # summed on device: one host sync per epoch
        self.train_gates.reset()
        self.selector_grads.reset()
        compiled = self.train_step
        if compiled is not None:
            compiled.start_epoch()
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
                if compiled is not None:
                    compiled(x, y)  # the whole step, its loss and gates summed on the device
                else:
                    with self._autocast():
                        output = model(x)
                    self.train_gates.update()  # the noise-free gates this batch trained with
                    loss = self.loss_fn(output, y)
                    self.optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    self.selector_grads.update()  # the loss's own selector gradient, before clipping
                    if cfg.grad_clip is not None and cfg.grad_clip > 0:
                        nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                    self.optimizer.step()
                    loss_sum += loss.detach() * x.shape[0]
                self.scheduler.step()
                samples += x.shape[0]
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        if compiled is not None:
            totals = compiled.totals  # (1,)-shaped sums of the one model
            loss_sum = totals.loss[0]
            self.train_gates.add_totals(totals.gate_entropy[0], totals.gate_decisions)
            self.selector_grads.add_totals(
                totals.selector_grad[0],
                totals.selector_square[0],
                totals.steps,
                elements=compiled.trained_selector_elements(),
            )
        return [float(loss_sum) / max(samples, 1)], samples

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

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"unsupported checkpoint format {state.get('format')!r}")
        _check_same_run(state["config"], self.cfg.to_dict())
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.train_step is not None:
            self.train_step.state_loaded()
        if self.freezer is not None:
            self.freezer.load_state_dict(state["freezer"])
            self.freezer.apply(self.model)
            if self.train_step is not None:
                self.train_step.freeze(self.freezer.frozen_layers)
        if self.mixer is not None:
            self.mixer.load_state_dict(state["mixer"])
        if self.augmenter is not None:
            self.augmenter.load_state_dict(state.get("augmenter"))
        restore_rng_state(state["rng"], self.data_generator)
        self.epoch = int(state["epoch"])
        self.history = list(state["history"])

    def seed_states(self) -> list[dict[str, Any]]:
        return [self.state_dict()]

    def load_seed_states(self, states: Sequence[Mapping[str, Any]]) -> None:
        (state,) = states
        self.load_state_dict(state)

    # ----- helpers ------------------------------------------------------------------------------------

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
