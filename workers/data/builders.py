"""Raw arrays -> ready tensors, one builder per task. Every statistic (pixel mean/std, vocabulary,
feature/target scaling) is fitted on the training split only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import TensorDataset

from workers.data.bundle import IGNORE_INDEX
from workers.data.corruptions import CorruptionSets
from workers.data.normalise import ChannelStats, Standardiser, images_to_unit_float
from workers.data.resolve import RawArrays
from workers.data.splits import carve_splits
from workers.data.vocab import EOS, PAD_ID, Vocabulary, encode_lm_stream, encode_padded, tokenize

__all__ = [
    "Built",
    "SplitPlan",
    "build_image",
    "build_language_model",
    "build_regression",
    "build_sequence_classification",
    "build_token_classification",
    "plan_splits",
]

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class SplitPlan:
    """Which pool ("train", "val", "test" or "all") and which indices each split takes."""

    pools: dict[str, str]
    indices: dict[str, np.ndarray]

    def take(self, raw: RawArrays, split: str, field_name: str) -> np.ndarray:
        pool = "train" if self.pools[split] == "all" else self.pools[split]
        return raw[f"{pool}_{field_name}"][self.indices[split]]


def plan_splits(raw: RawArrays, *, split_seed: int, val_fraction: float, test_fraction: float) -> SplitPlan:
    """Official splits are kept; what is missing is carved from the training pool by split_seed."""
    n_train = len(raw["train_x"])
    if "val_x" in raw and "test_x" in raw:
        pools = {split: split for split in SPLITS}
        indices = {split: np.arange(len(raw[f"{split}_x"])) for split in SPLITS}
    elif "test_x" in raw:
        carved = carve_splits(n_train, split_seed=split_seed, val_fraction=val_fraction)
        pools = {"train": "train", "val": "train", "test": "test"}
        indices = {"train": carved["train"], "val": carved["val"], "test": np.arange(len(raw["test_x"]))}
    else:
        indices = carve_splits(
            n_train, split_seed=split_seed, val_fraction=val_fraction, test_fraction=test_fraction
        )
        pools = {split: "all" for split in SPLITS}
    return SplitPlan(pools=pools, indices=indices)


@dataclass
class Built:
    """What a builder produces; the registry adds the dataset's identity to make a DatasetBundle."""

    splits: dict[str, TensorDataset]
    model_fields: dict[str, Any]
    eval_sets: dict[str, TensorDataset] = field(default_factory=dict)
    target_std: float = 1.0
    class_names: tuple[str, ...] | None = None
    vocab: tuple[str, ...] | None = None
    # Images: per-channel mean/std (of the training split, in [0, 1]) that standardised every split.
    pixel_mean: tuple[float, ...] | None = None
    pixel_std: tuple[float, ...] | None = None


def _pair(x: np.ndarray, y: np.ndarray) -> TensorDataset:
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def build_image(
    raw: RawArrays,
    plan: SplitPlan,
    *,
    num_classes: int,
    corruption_sets: CorruptionSets | None = None,
) -> Built:
    """Standardised (N, C, H, W) splits; `corruption_sets` adds corrupted copies of the test split."""
    unit = {split: images_to_unit_float(plan.take(raw, split, "x")) for split in SPLITS}  # (N, H, W, C)
    labels = {split: plan.take(raw, split, "y").astype(np.int64) for split in SPLITS}
    stats = ChannelStats.fit(unit["train"])
    splits = {split: _pair(stats.apply(unit[split]), labels[split]) for split in SPLITS}  # x: (N, C, H, W)
    corrupted = corruption_sets(unit["test"], labels["test"]) if corruption_sets is not None else {}
    eval_sets = {
        name: _pair(stats.apply(_as_unit(images)), set_labels.astype(np.int64))
        for name, (images, set_labels) in corrupted.items()
    }
    _, height, width, channels = unit["train"].shape
    if height != width:
        raise ValueError(f"square images expected, got {height}x{width}")
    return Built(
        splits=splits,
        eval_sets=eval_sets,
        model_fields={"image_size": int(height), "in_channels": int(channels), "num_classes": num_classes},
        pixel_mean=tuple(float(v) for v in stats.mean),
        pixel_std=tuple(float(v) for v in stats.std),
    )


def _as_unit(images: np.ndarray) -> np.ndarray:
    """Corrupted sets come as floats in [0, 1] (our corruptions) or uint8 (the published CIFAR-10-C)."""
    return images_to_unit_float(images) if images.dtype == np.uint8 else images


def build_sequence_classification(
    raw: RawArrays, plan: SplitPlan, *, max_len: int, num_classes: int, max_vocab: int | None = None
) -> Built:
    tokens = {
        split: [
            tokenize(str(text), lowercase=True, pretokenized=False) for text in plan.take(raw, split, "x")
        ]
        for split in SPLITS
    }
    vocab = Vocabulary.build(tokens["train"], max_size=max_vocab)
    splits = {
        split: _pair(
            encode_padded([vocab.ids(sentence) for sentence in tokens[split]], max_len),  # (N, T)
            plan.take(raw, split, "y").astype(np.int64),  # (N,)
        )
        for split in SPLITS
    }
    return Built(
        splits=splits,
        vocab=vocab.tokens,
        model_fields={
            "vocab_size": len(vocab),
            "max_len": max_len,
            "num_classes": num_classes,
            "head": "sequence",
            "pad_id": PAD_ID,
        },
    )


def build_token_classification(raw: RawArrays, plan: SplitPlan, *, max_len: int) -> Built:
    # Case is kept: capitalisation is the main cue for proper nouns (NNP) in Penn tagging.
    words = {split: [str(s).split() for s in plan.take(raw, split, "x")] for split in SPLITS}
    tags = {split: [str(s).split() for s in plan.take(raw, split, "y")] for split in SPLITS}
    vocab = Vocabulary.build(words["train"])
    # The tag set is the label space, not a learned statistic: take it from every split so a tag that is
    # rare enough to miss the training split still has a class id.
    tag_names = tuple(sorted({tag for split in SPLITS for line in tags[split] for tag in line}))
    tag_id = {tag: i for i, tag in enumerate(tag_names)}
    splits = {
        split: _pair(
            encode_padded([vocab.ids(sentence) for sentence in words[split]], max_len),  # (N, T)
            encode_padded([[tag_id[t] for t in line] for line in tags[split]], max_len, fill=IGNORE_INDEX),
        )
        for split in SPLITS
    }
    return Built(
        splits=splits,
        vocab=vocab.tokens,
        class_names=tag_names,
        model_fields={
            "vocab_size": len(vocab),
            "max_len": max_len,
            "num_classes": len(tag_names),
            "head": "token",
            "pad_id": PAD_ID,
        },
    )


def build_language_model(
    raw: RawArrays, plan: SplitPlan, *, block: int, max_vocab: int | None = None
) -> Built:
    words = {split: [str(s).lower().split() for s in plan.take(raw, split, "x")] for split in SPLITS}
    vocab = Vocabulary.build([*words["train"], [EOS]], max_size=max_vocab)
    eos_id = vocab.ids([EOS])[0]
    splits = {}
    for split in SPLITS:
        x, y = encode_lm_stream([vocab.ids(sentence) for sentence in words[split]], eos_id, block)  # (B, T)
        splits[split] = _pair(x, y)
    return Built(
        splits=splits,
        vocab=vocab.tokens,
        model_fields={"vocab_size": len(vocab), "max_len": block, "head": "lm", "pad_id": PAD_ID},
    )


def build_regression(raw: RawArrays, plan: SplitPlan) -> Built:
    x = {split: plan.take(raw, split, "x").astype(np.float64) for split in SPLITS}
    y = {split: plan.take(raw, split, "y").astype(np.float64) for split in SPLITS}
    scaler = Standardiser.fit(x["train"], y["train"])
    splits = {
        split: _pair(scaler.features(x[split]), scaler.target(y[split])) for split in SPLITS
    }  # (N, F), (N, 1)
    return Built(
        splits=splits,
        target_std=scaler.y_std,
        model_fields={"num_features": int(x["train"].shape[1]), "num_outputs": 1},
    )
