"""Seed-batched training: k seeds of ONE configuration trained together in one process, stacked.

A small model leaves a GPU mostly idle; stacking the parameters of k seeds and running them under
`torch.func.vmap` turns k launch-bound trials into one step over k times the work. Each seed keeps what a
single-seed `TrainingRun` with that seed gives it:

- init: each model is built right after `seed_everything(seed)`, exactly as TrainingRun builds it;
- data order, augmentation and MixUp/CutMix: the seed's own generators, seeded as TrainingRun seeds
  them, so batch b of seed s is the batch the single run with seed s sees at step b;
- AdamW with the same weight-decay groups, the same warmup+cosine schedule, gradient clipping with the
  norm taken over that seed's gradients only, its own AutoNorm-S freeze decision and, after it, its own
  post-freeze gate (workers.training.seed_step);
- per-epoch metrics with TrainingRun's keys (`selector_grad_var` included, from each seed's own slice of
  the stacked selector gradients), one dict per seed, and a checkpoint state per seed that a
  single-seed TrainingRun can load (and that this class can load back, k at a time).

What differs: dropout, drop-path and Gumbel gate noise are drawn per seed from the global generator
under `vmap(randomness="different")`. Every seed gets its own independent streams, but they are NOT the
streams a single-seed run with that seed would draw. With those three off, k stacked seeds match k
single-seed runs to float tolerance (the batched matmuls sum in another order). `samples_per_s` is per
seed: the k seeds together process k times as many samples in the same wall time.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from workers.training.augment import build_augmenter
from workers.training.batches import device_resident, iterate_batches
from workers.training.checkpoint import CHECKPOINT_FILE, CheckpointSchedule
from workers.training.config import TrainConfig, model_config
from workers.training.epochs import SeedEval, epoch_zero, run_epochs, test_metrics_per_seed, train_epoch
from workers.training.loop import CHECKPOINT_FORMAT, _check_same_run, resolve_device
from workers.training.metrics import GateStats, MetricAccumulator, TaskLoss
from workers.training.run_parts import (
    build_freezer,
    build_mixer,
    build_schedule,
    freeze_metrics,
    load_bundle,
    progress_bar,
)
from workers.training.seed_metrics import StackedTrainGateEntropy, stacked_gate_summaries
from workers.training.seed_step import SeedBatchedStep, build_stacked_optimizer
from workers.training.seeding import capture_rng_state, restore_rng_state, seed_everything
from workers.training.stacked import StackedModels

__all__ = ["SeedBatchReportFn", "SeedBatchedRun", "run_seed_batch", "seed_checkpoint_path"]

# (one metrics dict per seed in `seeds` order, the directory holding that epoch's checkpoints or None)
SeedBatchReportFn = Callable[[list[dict[str, Any]], "Path | None"], None]


def seed_checkpoint_path(checkpoint_dir: Path | str, seed: int) -> Path:
    """Where a seed batch keeps seed `seed`'s checkpoint: a single-seed TrainingRun checkpoint file."""
    return Path(checkpoint_dir) / f"seed{seed}" / CHECKPOINT_FILE


def run_seed_batch(
    cfg: TrainConfig,
    seeds: Sequence[int],
    *,
    checkpoint_dir: Path | str,
    resume: bool = True,
    report: SeedBatchReportFn | None = None,
    settle: Callable[[], None] | None = None,
    checkpoint_every_s: float = 0.0,
) -> list[dict[str, Any]]:
    """`run_training` for k seeds trained together: epoch 0, then every epoch's metrics per seed. An epoch
    that is checkpointed (as in `run_training`: after `settle()`, on `checkpoint_every_s`'s schedule) writes
    one TrainingRun-compatible file per seed (`seed_checkpoint_path`) before `report`.
    With `resume` and checkpoints of every seed present, training continues after their epoch. Returns
    each seed's last metrics."""
    run = SeedBatchedRun(cfg, seeds)
    run_epochs(
        run,
        epochs=cfg.epochs,
        checkpoint_dir=Path(checkpoint_dir),
        checkpoint_files=[seed_checkpoint_path(checkpoint_dir, seed) for seed in run.seeds],
        resume=resume,
        report=report,
        settle=settle,
        start_schedule=lambda: CheckpointSchedule(checkpoint_every_s),
    )
    return [dict(history[-1]) for history in run.histories]


class SeedBatchedRun:
    """k seeds of one TrainConfig trained together; `cfg.seed` is replaced by each of `seeds`. Its epochs
    are workers.training.epochs' (TrainingRun's too); it supplies the steps of its k seeds (`EpochSteps`)."""

    def __init__(self, cfg: TrainConfig, seeds: Sequence[int]) -> None:
        # Imported here, as in TrainingRun, so the module imports without the model and data registries.
        from models import build_model
        from models.norms import gated_norms
        from studies.methods import norm_for_method

        self.seeds = _checked_seeds(seeds)
        self.cfg = cfg
        self.seed_configs = [dataclasses.replace(cfg, seed=seed) for seed in self.seeds]
        self.device = resolve_device(cfg.device)
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.bundle = load_bundle(cfg)
        choice = norm_for_method(cfg.method)
        model_name = cfg.model or self.bundle.default_model
        fields = model_config(
            cfg, norm_kind=choice.kind, model_fields=self.bundle.model_fields, method_options=choice.options
        )
        models = []
        for seed in self.seeds:
            seed_everything(seed)  # after loading the data, before building: TrainingRun's order
            models.append(build_model(model_name, fields))
        self.stacked = StackedModels(models).to(self.device)
        del models
        self.optimizer, self.param_order = build_stacked_optimizer(
            self.stacked, lr=cfg.lr, weight_decay=cfg.weight_decay
        )
        self.steps_per_epoch, self.scheduler = build_schedule(self.optimizer, cfg, len(self.bundle.train))
        self.loss_fn = TaskLoss(
            self.bundle.task, label_smoothing=cfg.label_smoothing, ignore_index=self.bundle.ignore_index
        )
        self.step = SeedBatchedStep(
            self.stacked,
            loss_fn=self.loss_fn,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            grad_clip=cfg.grad_clip,
            device=self.device,
            amp=cfg.amp,
            compile=cfg.compile,
        )
        self.freezers = (
            [build_freezer(cfg, gate_freeze=True) for _ in self.seeds] if choice.gate_freeze else None
        )
        # GateFreezer.observe wants a model to count gated layers and to flip requires_grad on; the stacked
        # tensors carry no requires_grad, so it gets a parameter-free skeleton of the architecture.
        self._freeze_skeleton = copy.deepcopy(self.stacked.template).to("meta")
        self.gate_layers = [name for name, _ in gated_norms(self.stacked.template)]
        self.train_gates = StackedTrainGateEntropy(len(self.seeds))
        self.data_generators = [torch.Generator().manual_seed(seed) for seed in self.seeds]
        self.mixers = [build_mixer(cfg, self.bundle, seed) for seed in self.seeds]
        self.augmenters = [
            build_augmenter(cfg.augment, self.bundle, model=model_name, seed=seed) for seed in self.seeds
        ]
        self._train_tensors = self._device_train_tensors()
        self.epoch = 0
        self.histories: list[list[dict[str, Any]]] = [[] for _ in self.seeds]

    @property
    def num_seeds(self) -> int:
        return len(self.seeds)

    # ----- epochs -------------------------------------------------------------------------------------

    def initial_report(self) -> list[dict[str, Any]]:
        """Epoch 0 per seed: init ranks of that seed's model and its untrained validation metric."""
        return epoch_zero(self)

    def train_one_epoch(self) -> list[dict[str, Any]]:
        """One epoch of every seed; returns one metrics dict per seed, in `seeds` order."""
        return train_epoch(self)

    def final_test_metrics(self) -> list[dict[str, float]]:
        """Per seed: test_<metric>, and per corruption set test_<metric>_<name> plus their mean."""
        return test_metrics_per_seed(self)

    # ----- the steps of its seeds (workers.training.epochs.EpochSteps) ----------------------------------

    def seed_model(self, index: int) -> nn.Module:
        return self.stacked.materialize(index)

    def evaluate_seeds(self, dataset: Dataset) -> list[SeedEval]:
        return self.evaluate(dataset)

    def train_gate_metrics(self) -> list[dict[str, float]]:
        return self.train_gates.compute()

    def selector_grad_metrics(self) -> list[dict[str, float]]:
        return self.step.selector_grads.compute()

    @property
    def freezes(self) -> bool:
        return self.freezers is not None

    def observe_freeze(self, index: int, entropies: list[float]) -> None:
        if self.freezers is None:
            return
        freezer = self.freezers[index]
        # The skeleton has no weights to freeze: the stacked step masks the seed's frozen selectors instead.
        if freezer.observe(self.epoch, entropies, self._freeze_skeleton):
            self.step.freezes.set_frozen_layers(index, freezer.frozen_layers)

    def freeze_metrics(self, index: int) -> dict[str, int]:
        return freeze_metrics(
            self.freezers[index] if self.freezers is not None else None, len(self.gate_layers)
        )

    @torch.no_grad()
    def evaluate(self, dataset: Dataset) -> list[tuple[float, dict[str, float]]]:
        """Per seed: the dataset's metric on `dataset` and the eval-mode (noise-free) gate statistics."""
        template = self.stacked.template
        template.eval()
        accumulators = [
            MetricAccumulator(
                self.bundle.metric, target_std=self.bundle.target_std, ignore_index=self.bundle.ignore_index
            )
            for _ in self.seeds
        ]
        gates = [GateStats() for _ in self.seeds]
        try:
            for x, y in iterate_batches(dataset, self.cfg.eval_batch_size):
                x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
                # (k, B, ...); the per-seed frozen flags ride along: a frozen "hard" gate is one-hot in eval too
                outputs, probs = self.stacked.forward_shared_input(
                    self._eval_forward, x, self.step.call_buffers()
                )
                self.step.clear_gate_cache()
                summaries = stacked_gate_summaries(self.gate_layers, probs)
                for i in range(self.num_seeds):
                    accumulators[i].update(outputs[i], y)
                    if summaries:
                        gates[i].update(summaries[i], x.shape[0])
        finally:
            template.train()
        return [
            (acc.compute(), seed_gates.compute()) for acc, seed_gates in zip(accumulators, gates, strict=True)
        ]

    def train_seeds(self) -> tuple[list[float], int]:
        """One epoch of stacked optimizer steps: each seed's mean training loss, and the samples per seed."""
        self.stacked.template.train()
        orders = torch.stack(
            [torch.randperm(len(self.bundle.train), generator=g) for g in self.data_generators]
        )
        loss_sum = torch.zeros(self.num_seeds, device=self.device)  # (k,) on device: one host sync per epoch
        self.train_gates.reset()
        self.step.selector_grads.reset(self.step.freezes.trained_selector_elements())
        self.step.start_epoch()
        totals = self.step.totals  # a compiled step sums the loss and gates itself
        samples = 0
        bar = progress_bar(
            self.cfg, self.steps_per_epoch, f"epoch {self.epoch}/{self.cfg.epochs} ({self.num_seeds} seeds)"
        )
        try:
            for step, (x, y) in enumerate(self._stacked_batches(orders)):
                if step >= self.steps_per_epoch:
                    break
                x, y = self._augment_and_mix(x, y)  # (k, B, ...)
                loss, probs = self.step(x, y)
                if totals is None:
                    self.train_gates.update(probs)
                    loss_sum += loss * x.shape[1]
                samples += x.shape[1]
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        if totals is not None:
            loss_sum = totals.loss
            self.train_gates.add_totals(totals.gate_entropy, totals.gate_decisions)
            self.step.selector_grads.add_totals(totals.selector_grad, totals.selector_square, totals.steps)
        return [value / max(samples, 1) for value in loss_sum.tolist()], samples

    def _stacked_batches(self, orders: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batch b of every seed, stacked: x (k, B, ...), y (k, B, ...), on the run's device.

        `orders` (k, N) holds each seed's permutation of the training set; seed i's batch b is
        orders[i, b*B:(b+1)*B], exactly what iterate_batches gives a single-seed run.
        """
        batch_size = self.cfg.batch_size
        if self._train_tensors is not None:
            size = orders.shape[1]
            orders = orders.to(self._train_tensors[0].device)  # one copy an epoch, not one per step
            for start in range(0, size, batch_size):
                index = orders[:, start : start + batch_size]  # (k, B)
                x, y = (t[index] for t in self._train_tensors)
                yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            return
        seed_batches = [iterate_batches(self.bundle.train, batch_size, order=order) for order in orders]
        for batches in zip(*seed_batches, strict=True):
            x = torch.stack([bx for bx, _ in batches]).to(self.device, non_blocking=True)
            y = torch.stack([by for _, by in batches]).to(self.device, non_blocking=True)
            yield x, y

    def _augment_and_mix(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each seed's own augmenter and mixer on its own batch, in TrainingRun's order."""
        if all(a is None for a in self.augmenters) and all(m is None for m in self.mixers):
            return x, y
        xs, ys = [], []
        for i, (augmenter, mixer) in enumerate(zip(self.augmenters, self.mixers, strict=True)):
            xi, yi = x[i], y[i]
            if augmenter is not None:
                xi = augmenter(xi)
            if mixer is not None:
                xi, yi = mixer(xi, yi)
            xs.append(xi)
            ys.append(yi)
        return torch.stack(xs), torch.stack(ys)

    def _eval_forward(
        self, params: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor], x: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        with self.step.autocast():
            output = self.stacked.call(params, buffers, x)
        return output, tuple(
            cast(torch.Tensor, norm.last_probs) for norm in self.step.gated
        )  # set by this forward

    # ----- checkpoint state ---------------------------------------------------------------------------

    def state_dict(self) -> list[dict[str, Any]]:
        """One TrainingRun-compatible checkpoint state per seed, in `seeds` order.

        Each is what a single-seed TrainingRun with that seed would save (its config, model, AdamW state,
        schedule, freezer, mixer, augmenter, data-order generator, history), so
        `TrainingRun(cfg with that seed).load_state_dict(state)` continues that seed alone. The global RNG
        state (the shared noise stream) is the same in all k. A `seed_batch` entry records the batch.
        """
        optimizer_state = self.optimizer.state_dict()
        parts = zip(self.mixers, self.augmenters, strict=True)
        return [
            {
                "format": CHECKPOINT_FORMAT,
                "epoch": self.epoch,
                "config": self.seed_configs[i].to_dict(),
                "model": self.stacked.seed_state_dict(i),
                "optimizer": self._seed_optimizer_state(optimizer_state, i),
                "scheduler": self.scheduler.state_dict(),
                "freezer": self.freezers[i].state_dict() if self.freezers is not None else None,
                "mixer": mixer.state_dict() if mixer is not None else None,
                "augmenter": augmenter.state_dict() if augmenter is not None else None,
                "rng": capture_rng_state(self.data_generators[i]),
                "history": copy.deepcopy(self.histories[i]),
                "seed_batch": {"seeds": list(self.seeds), "index": i},
            }
            for i, (mixer, augmenter) in enumerate(parts)
        ]

    # run_epochs' names for the k states (a TrainingRun's are a list of one).
    def seed_states(self) -> list[dict[str, Any]]:
        return self.state_dict()

    def load_seed_states(self, states: Sequence[Mapping[str, Any]]) -> None:
        self.load_state_dict(states)

    def load_state_dict(self, states: Sequence[Mapping[str, Any]]) -> None:
        """Restore from k per-seed states in `seeds` order: this class's own `state_dict()`, or k
        single-seed TrainingRun checkpoints taken at the same epoch (then the shared noise stream continues
        from the last seed's global RNG state)."""
        if len(states) != self.num_seeds:
            raise ValueError(f"got {len(states)} seed states for {self.num_seeds} seeds")
        epochs = {int(state["epoch"]) for state in states}
        if len(epochs) != 1:
            raise ValueError(
                f"seed states come from different epochs {sorted(epochs)}; a batch resumes together"
            )
        for i, state in enumerate(states):
            if state.get("format") != CHECKPOINT_FORMAT:
                raise ValueError(
                    f"unsupported checkpoint format {state.get('format')!r} (seed {self.seeds[i]})"
                )
            _check_same_run(state["config"], self.seed_configs[i].to_dict())
        scheduler_steps = {int(state["scheduler"]["last_epoch"]) for state in states}
        if len(scheduler_steps) != 1:
            raise ValueError(f"seed states disagree on the schedule step: {sorted(scheduler_steps)}")
        for i, state in enumerate(states):
            self.stacked.load_seed_state_dict(i, state["model"])
        self.optimizer.load_state_dict(self._merged_optimizer_state([state["optimizer"] for state in states]))
        self.step.state_loaded()
        self.scheduler.load_state_dict(states[0]["scheduler"])
        self.step.freezes.clear()
        for i, state in enumerate(states):
            if self.freezers is not None:
                self.freezers[i].load_state_dict(state["freezer"])
                self.step.freezes.set_frozen_layers(i, self.freezers[i].frozen_layers)
            mixer, augmenter = self.mixers[i], self.augmenters[i]
            if mixer is not None:
                mixer.load_state_dict(state["mixer"])
            if augmenter is not None:
                augmenter.load_state_dict(state.get("augmenter"))
            restore_rng_state(state["rng"], self.data_generators[i])
            self.histories[i] = copy.deepcopy(list(state["history"]))
        self.epoch = epochs.pop()

    def _seed_optimizer_state(self, full: Mapping[str, Any], index: int) -> dict[str, Any]:
        """Seed `index`'s slice of the stacked AdamW state, in the single-seed optimizer's layout."""
        state: dict[int, dict[str, Any]] = {}
        for param_index, values in full["state"].items():
            name = self.param_order[param_index]
            entry: dict[str, Any] = {}
            for key, value in values.items():
                if key == "step":
                    entry[key] = value.clone()
                    if self.step.freezes.is_frozen(index, name):
                        # A single-seed run stops stepping a selector once it is frozen.
                        freezer = self.freezers[index] if self.freezers is not None else None
                        if freezer is not None and freezer.freeze_epoch is not None:
                            entry[key].fill_(freezer.freeze_epoch * self.steps_per_epoch)
                elif torch.is_tensor(value) and value.dim() > 0 and value.shape[0] == self.num_seeds:
                    entry[key] = value[index].clone()
                else:
                    entry[key] = copy.deepcopy(value)
            state[param_index] = entry
        return {"state": state, "param_groups": copy.deepcopy(full["param_groups"])}

    def _merged_optimizer_state(self, seed_states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """k single-seed AdamW states stacked into this run's optimizer layout."""
        ours = self.optimizer.state_dict()["param_groups"]
        groups = seed_states[0]["param_groups"]
        if [g["params"] for g in groups] != [g["params"] for g in ours]:
            raise ValueError("the checkpoint's optimizer groups do not match this model's parameters")
        merged: dict[int, dict[str, Any]] = {}
        for param_index in range(len(self.param_order)):
            entries = [state["state"].get(param_index) for state in seed_states]
            if all(entry is None for entry in entries):
                continue
            if any(entry is None for entry in entries):
                raise ValueError(
                    f"seed states disagree on whether parameter {self.param_order[param_index]} was stepped"
                )
            merged_entry: dict[str, Any] = {}
            for key, value in entries[0].items():
                if key == "step":
                    # Frozen selectors of some seeds stopped counting; the stacked tensor steps with the rest.
                    merged_entry[key] = max((entry[key] for entry in entries), key=float).clone()
                elif torch.is_tensor(value):
                    merged_entry[key] = torch.stack([entry[key] for entry in entries])
                else:
                    merged_entry[key] = value
            merged[param_index] = merged_entry
        return {"state": merged, "param_groups": copy.deepcopy(groups)}

    # ----- helpers ------------------------------------------------------------------------------------

    def _device_train_tensors(self) -> tuple[torch.Tensor, ...] | None:
        """The training split's tensors, moved to the GPU once (where they fit) so the k-seed gather runs
        there; on CPU the split's own tensors. None for datasets that are not a TensorDataset (read item
        by item)."""
        dataset = device_resident(self.bundle.train, self.device)
        return dataset.tensors if isinstance(dataset, TensorDataset) else None


def _checked_seeds(seeds: Sequence[int]) -> list[int]:
    values = list(seeds)
    if not values:
        raise ValueError("seeds must name at least one seed")
    if any(isinstance(seed, bool) or not isinstance(seed, int) for seed in values):
        raise ValueError(f"seeds must be integers, got {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"seeds must be distinct, got {values!r}")
    return values
