"""The pieces every training run builds from its TrainConfig, shared by the single-seed TrainingRun and the
seed-batched SeedBatchedRun so both set up, schedule and report exactly alike."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal, overload

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from workers.training.batches import num_batches
from workers.training.config import TrainConfig
from workers.training.mixing import BatchMixer
from workers.training.schedule import build_warmup_cosine

if TYPE_CHECKING:
    from models.norms import GateFreezer
    from workers.data.bundle import DatasetBundle

__all__ = [
    "build_freezer",
    "build_mixer",
    "build_schedule",
    "freeze_metrics",
    "load_bundle",
    "progress_bar",
    "test_metrics",
    "validation_metrics",
]


def load_bundle(cfg: TrainConfig) -> DatasetBundle:
    # Imported here so workers.training stays importable (and testable) without the data registry.
    from workers.data import get_dataset

    return get_dataset(
        cfg.dataset,
        split_seed=cfg.split_seed,
        root=cfg.data_root,
        corruptions=cfg.corruptions,
        severities=cfg.severities,
    )


def build_schedule(optimizer: Optimizer, cfg: TrainConfig, num_train: int) -> tuple[int, LRScheduler]:
    """(optimizer steps per epoch, the warmup + cosine schedule over the whole run)."""
    steps_per_epoch = num_batches(num_train, cfg.batch_size)
    if cfg.max_steps_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, cfg.max_steps_per_epoch)
    total_steps = steps_per_epoch * cfg.epochs
    warmup_steps = min(total_steps, round(cfg.warmup_epochs * steps_per_epoch))
    scheduler = build_warmup_cosine(
        optimizer, warmup_steps=warmup_steps, total_steps=total_steps, min_ratio=cfg.min_lr_ratio
    )
    return steps_per_epoch, scheduler


def build_mixer(cfg: TrainConfig, bundle: DatasetBundle, seed: int) -> BatchMixer | None:
    if cfg.mixup <= 0 and cfg.cutmix <= 0:
        return None
    if bundle.task != "image_classification":
        raise ValueError(f"MixUp/CutMix apply to images only, not to {bundle.task!r}")
    return BatchMixer(
        num_classes=int(bundle.model_fields["num_classes"]),
        mixup_alpha=cfg.mixup,
        cutmix_alpha=cfg.cutmix,
        seed=seed,
    )


@overload
def build_freezer(cfg: TrainConfig, gate_freeze: Literal[True]) -> GateFreezer: ...
@overload
def build_freezer(cfg: TrainConfig, gate_freeze: bool) -> GateFreezer | None: ...
def build_freezer(cfg: TrainConfig, gate_freeze: bool) -> GateFreezer | None:
    """The AutoNorm-S freeze controller, or None for methods without the freeze schedule."""
    from models.norms import GateFreezer

    if not gate_freeze:
        return None
    return GateFreezer(t_freeze=cfg.t_freeze, eps_h=cfg.eps_h, scope=cfg.freeze_scope)


def freeze_metrics(freezer: GateFreezer | None, num_layers: int) -> dict[str, int]:
    """gates_frozen, freeze_epoch (-1: none) and gate_frozen_<i> of one seed's freeze controller; a method
    without the freeze schedule reports nothing frozen."""
    if freezer is None:
        return {"gates_frozen": 0, "freeze_epoch": -1}
    return freezer.layer_metrics(num_layers)


def validation_metrics(metric: str, value: float) -> dict[str, float]:
    return {f"val_{metric}": value, "objective": value}


def test_metrics(metric: str, test_value: float, corrupted: dict[str, float]) -> dict[str, float]:
    """test_<metric>, and per corruption set test_<metric>_<name> plus their mean."""
    metrics = {f"test_{metric}": test_value}
    for key, value in corrupted.items():
        metrics[f"test_{metric}_{key}"] = value
    if corrupted:
        metrics[f"test_{metric}_corruption_mean"] = sum(corrupted.values()) / len(corrupted)
    return metrics


def progress_bar(cfg: TrainConfig, total: int, desc: str) -> Any:
    """A tqdm bar per epoch when asked for (cfg.progress), else only when stderr is a terminal."""
    show = cfg.progress if cfg.progress is not None else sys.stderr.isatty()
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)
