"""Training-image augmentation (the Compact-Transformers recipe) on batched tensors, seeded by the trial seed.

Policies (TrainConfig.augment, spec knob `augment`):

    none         nothing
    crop_flip    random crop with zero (black) padding, as torchvision's RandomCrop(32, padding=4), then a
                 horizontal flip with probability 0.5, but only on datasets whose classes are mirror-symmetric
                 (DatasetInfo.mirror_symmetric: CIFAR, Fashion-MNIST and their corruption sets; never digits)
    autoaugment  AutoAugment's CIFAR-10 policy as Compact-Transformers ships it, then crop_flip
    randaugment  RandAugment with torchvision's defaults (2 ops, magnitude 9 of 31 bins), then crop_flip

The order (policy, crop, flip) is the one of Compact-Transformers' CIFAR script (examples/main.py):
CIFAR10Policy(), RandomCrop(img_size, padding=4), RandomHorizontalFlip().

Unset (None) means the model's default: crop_flip for the paper-sized preset `vit_lite_paper` (the recipe
the paper's vision numbers assume), none for the tiny presets and raw model names (smoke-test sizes, a few
steps on 8x8 digits, where the point is speed, not accuracy).

The ops are torch re-implementations of the PIL ones the reference recipe runs (no torchvision), on float
images: on uint8 inputs each matches PIL within one grey level (tests compare them), except that bicubic
shear blends into the fill at the edges where PIL cuts off. They live in workers.training.augment_ops, the
policies' random choices in workers.training.augment_policies; this module resolves the policy and applies it.

Every random choice is per sample and comes from the augmenter's own torch.Generator (seeded from the trial
seed, on the CPU), whose state goes into the checkpoint, so a resumed run replays the same augmentations.
The choices reach the device in one non-blocking copy per batch, so augmenting never synchronises the GPU.
Augmentation is applied to training batches only; evaluation never calls it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from studies.knobs import KNOBS
from workers.training.augment_ops import OPS
from workers.training.augment_policies import Step, auto_augment_plan, rand_augment_plan, schedule

if TYPE_CHECKING:
    from workers.data.bundle import DatasetBundle

__all__ = [
    "AUGMENT_POLICIES",
    "PAPER_SIZED_MODELS",
    "ImageAugmenter",
    "build_augmenter",
    "crop_padding_for",
    "default_augment",
    "resolve_augment",
]

# One table: the spec knob's categories are the policies.
AUGMENT_POLICIES: tuple[str, ...] = KNOBS["augment"].categories
# Presets that get crop_flip when a config leaves `augment` unset.
PAPER_SIZED_MODELS = frozenset({"vit_lite_paper"})

# Compact-Transformers pads 32x32 CIFAR images by 4 px. Smaller images get the same fraction of their side
# (rounded, at least 1 px): 28x28 -> 4 px, 8x8 digits -> 1 px, where 4 px would shift away half the digit.
_REFERENCE_SIZE, _REFERENCE_PADDING = 32, 4
# Offsets the augmenter's generator seed from the trial seed, so its stream differs from the data order's.
_STREAM_TAG = 0x41_55_47  # "AUG"


def crop_padding_for(image_size: int) -> int:
    """Padding of the random crop: 4 px at 32 px, scaled with the image side (at least 1 px)."""
    return max(1, math.floor(_REFERENCE_PADDING * image_size / _REFERENCE_SIZE + 0.5))


def default_augment(model: str) -> str:
    """The policy a config gets when it leaves `augment` unset."""
    return "crop_flip" if model in PAPER_SIZED_MODELS else "none"


def resolve_augment(requested: str | None, *, model: str, task: str) -> str:
    """The policy a run uses: `requested`, or the model's default; only image classification augments."""
    if requested is not None and requested not in AUGMENT_POLICIES:
        raise ValueError(f"unknown augment policy {requested!r}; choose one of {', '.join(AUGMENT_POLICIES)}")
    if task != "image_classification":
        if requested not in (None, "none"):
            raise ValueError(f"augment={requested!r} applies to images only, not to {task!r}")
        return "none"
    return default_augment(model) if requested is None else requested


def build_augmenter(
    requested: str | None, bundle: DatasetBundle, *, model: str, seed: int
) -> ImageAugmenter | None:
    """The augmenter of one run, or None when its policy is `none`."""
    policy = resolve_augment(requested, model=model, task=bundle.task)
    if policy == "none":
        return None
    if bundle.pixel_mean is None or bundle.pixel_std is None:
        raise ValueError(f"dataset {bundle.name!r} carries no pixel statistics to augment with")
    return ImageAugmenter(
        policy,
        image_size=int(bundle.model_fields["image_size"]),
        mirror_symmetric=bundle.mirror_symmetric,
        mean=bundle.pixel_mean,
        std=bundle.pixel_std,
        seed=seed,
    )


class ImageAugmenter:
    """Augments standardised training batches (N, C, H, W) -> (N, C, H, W), same dtype and device.

    Crop and flip work on the standardised tensor (the padding is the standardised value of black);
    the AutoAugment/RandAugment ops work in [0, 1] pixel space, undoing the dataset's per-channel
    standardisation (`mean`, `std` of the training split) and redoing it afterwards.
    """

    def __init__(
        self,
        policy: str,
        *,
        image_size: int,
        mirror_symmetric: bool,
        mean: Sequence[float],
        std: Sequence[float],
        seed: int,
    ) -> None:
        if policy not in AUGMENT_POLICIES or policy == "none":
            raise ValueError(f"ImageAugmenter needs one of {AUGMENT_POLICIES[1:]}, got {policy!r}")
        self.policy = policy
        self.image_size = image_size
        self.padding = crop_padding_for(image_size)
        self.flip = mirror_symmetric
        self.mean = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)  # (1, C, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
        self._stats_on: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
        stream = np.random.SeedSequence([int(seed) % 2**63, _STREAM_TAG]).generate_state(2, dtype=np.uint32)
        self.generator = torch.Generator().manual_seed(int(stream[0]) << 32 | int(stream[1]))

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != self.mean.shape[1]:
            raise ValueError(f"expected (N, {self.mean.shape[1]}, H, W) images, got {tuple(x.shape)}")
        draws = self._draw(x.shape[0]).to(x.device)
        mean, std = self._stats(x.device)
        if draws.steps:
            unit = (x * std + mean).clamp_(0.0, 1.0)  # (N, C, H, W) in [0, 1]
            for step in draws.steps:  # each op on the samples that drew it, in the policy's order
                rows = draws.rows[step.start : step.stop]
                magnitudes = draws.magnitudes[step.start : step.stop].to(x.dtype)
                unit.index_copy_(0, rows, OPS[step.op](unit.index_select(0, rows), magnitudes, step.fill))
            x = ((unit - mean) / std).to(x.dtype)
        x = self._random_crop(x, draws.offsets, fill=(-mean / std).to(x.dtype))
        if draws.flipped is not None:
            x = torch.where(draws.flipped.view(-1, 1, 1, 1), x.flip(-1), x)
        return x

    def _draw(self, n: int) -> _Draws:
        """All random choices of a batch of n, on the CPU, in a fixed order: policy ops, crops, flips."""
        if self.policy in ("autoaugment", "randaugment"):
            plan = auto_augment_plan if self.policy == "autoaugment" else rand_augment_plan
            steps, rows, magnitudes = schedule(plan(n, self.image_size, self.generator))
        else:
            steps, rows, magnitudes = [], torch.zeros(0, dtype=torch.long), torch.zeros(0)
        offsets = torch.randint(0, 2 * self.padding + 1, (n, 2), generator=self.generator)  # (N, 2)
        flipped = torch.rand(n, generator=self.generator) < 0.5 if self.flip else None  # (N,)
        return _Draws(steps, rows, magnitudes, offsets, flipped)

    def _stats(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if device not in self._stats_on:  # copied once per device, not once per batch
            self._stats_on[device] = (self.mean.to(device), self.std.to(device))
        return self._stats_on[device]

    def _random_crop(self, x: torch.Tensor, offsets: torch.Tensor, *, fill: torch.Tensor) -> torch.Tensor:
        """Pad by `padding` with `fill` (1, C, 1, 1), then crop H x W at `offsets` (N, 2) per sample."""
        n, c, h, w = x.shape
        p = self.padding
        padded = fill.expand(n, c, h + 2 * p, w + 2 * p).clone()  # (N, C, H + 2p, W + 2p)
        padded[:, :, p : p + h, p : p + w] = x
        rows = offsets[:, 0:1] + torch.arange(h, device=x.device)  # (N, H)
        cols = offsets[:, 1:2] + torch.arange(w, device=x.device)  # (N, W)
        batch = torch.arange(n, device=x.device).view(n, 1, 1, 1)
        channel = torch.arange(c, device=x.device).view(1, c, 1, 1)
        return padded[batch, channel, rows.view(n, 1, h, 1), cols.view(n, 1, 1, w)]  # (N, C, H, W)

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state is None:
            raise ValueError(
                f"the checkpoint holds no augmentation state, but this run augments ({self.policy})"
            )
        if state.get("policy") != self.policy:
            raise ValueError(f"checkpoint augmenter ran {state.get('policy')!r}, this run {self.policy!r}")
        self.generator.set_state(state["generator"])


@dataclass(frozen=True)
class _Draws:
    """One batch's random choices: op steps with their packed rows and magnitudes, crop offsets (N, 2)
    and flips (N,) or None where the dataset must not be flipped."""

    steps: list[Step]
    rows: torch.Tensor
    magnitudes: torch.Tensor
    offsets: torch.Tensor
    flipped: torch.Tensor | None

    def to(self, device: torch.device) -> _Draws:
        """On `device` in two non-blocking copies: a blocking copy per op would stall the GPU queue each time."""
        if device.type == "cpu":
            return self
        n = len(self.offsets)
        flips = self.flipped.long() if self.flipped is not None else torch.zeros(0, dtype=torch.long)
        ints = _to_device(torch.cat([self.offsets.reshape(-1), flips, self.rows]), device)
        flipped = ints[2 * n : 3 * n] > 0 if self.flipped is not None else None
        rows = ints[2 * n + len(flips) :]
        return _Draws(
            self.steps, rows, _to_device(self.magnitudes, device), ints[: 2 * n].view(n, 2), flipped
        )


def _to_device(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small CPU tensor on `device` without stalling it: pinned memory, non-blocking copy."""
    if device.type == "cpu":
        return values
    return values.pin_memory().to(device, non_blocking=True)
