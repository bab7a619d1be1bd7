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
shear blends into the fill at the edges where PIL cuts off.

Every random choice is per sample and comes from the augmenter's own torch.Generator (seeded from the trial
seed, on the CPU), whose state goes into the checkpoint, so a resumed run replays the same augmentations.
The choices reach the device in one non-blocking copy per batch, so augmenting never synchronises the GPU.
Augmentation is applied to training batches only; evaluation never calls it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from studies.knobs import KNOBS

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

Op = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


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
                unit.index_copy_(0, rows, _OPS[step.op](unit.index_select(0, rows), magnitudes, step.fill))
            x = ((unit - mean) / std).to(x.dtype)
        x = self._random_crop(x, draws.offsets, fill=(-mean / std).to(x.dtype))
        if draws.flipped is not None:
            x = torch.where(draws.flipped.view(-1, 1, 1, 1), x.flip(-1), x)
        return x

    def _draw(self, n: int) -> _Draws:
        """All random choices of a batch of n, on the CPU, in a fixed order: policy ops, crops, flips."""
        if self.policy in ("autoaugment", "randaugment"):
            plan = _auto_augment_plan if self.policy == "autoaugment" else _rand_augment_plan
            steps, rows, magnitudes = _schedule(plan(n, self.image_size, self.generator))
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


# ----- pixel-space ops: (k, C, H, W) in [0, 1], per-sample magnitude (k,), fill in [0, 1] -> same -----------


def _grey(u: torch.Tensor) -> torch.Tensor:
    """ITU-R 601 luma as PIL's convert("L") computes it; (k, 1, H, W)."""
    if u.shape[1] == 1:
        return u
    return 0.299 * u[:, 0:1] + 0.587 * u[:, 1:2] + 0.114 * u[:, 2:3]


def _blend(u: torch.Tensor, degenerate: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """PIL ImageEnhance: degenerate + factor * (image - degenerate), clipped; factor (k,)."""
    return (degenerate + factor.view(-1, 1, 1, 1) * (u - degenerate)).clamp(0.0, 1.0)


def _brightness(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return _blend(u, torch.zeros_like(u), 1.0 + m)


def _color(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return _blend(u, _grey(u).expand_as(u), 1.0 + m)  # a grey image is its own grey version: no-op


def _contrast(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    mean = _grey(u).mean(dim=(1, 2, 3), keepdim=True)  # (k, 1, 1, 1)
    return _blend(u, mean.expand_as(u), 1.0 + m)


def _sharpness(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL's SMOOTH filter (centre 5, neighbours 1, / 13); border pixels keep their value.
    c = u.shape[1]
    kernel = torch.ones(c, 1, 3, 3, device=u.device, dtype=u.dtype)
    kernel[:, :, 1, 1] = 5.0
    smooth = F.conv2d(u, kernel / 13.0, groups=c)  # (k, C, H - 2, W - 2)
    degenerate = u.clone()
    degenerate[:, :, 1:-1, 1:-1] = smooth
    return _blend(u, degenerate, 1.0 + m)


def _levels(u: torch.Tensor) -> torch.Tensor:
    """[0, 1] -> integer levels 0..255 (the uint8 image PIL would hold)."""
    return (u * 255.0).round().clamp(0, 255).to(torch.int64)


def _posterize(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    bits = m.round().to(torch.int64).view(-1, 1, 1, 1)  # keep the top `bits` bits of each level
    step = torch.pow(2, 8 - bits)
    return (torch.div(_levels(u), step, rounding_mode="floor") * step).to(u.dtype) / 255.0


def _solarize(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL ImageOps.solarize: levels at or above the threshold (0..256) are inverted.
    above = _levels(u) >= m.view(-1, 1, 1, 1)
    return torch.where(above, 1.0 - u, u)


def _invert(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return 1.0 - u


def _autocontrast(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # Per image and channel: stretch [min, max] to [0, 1]; a flat channel stays as it is.
    low = u.amin(dim=(2, 3), keepdim=True)
    high = u.amax(dim=(2, 3), keepdim=True)
    spread = high - low
    stretched = (u - low) / torch.where(spread > 0, spread, torch.ones_like(spread))
    return torch.where(spread > 0, stretched, u)


def _equalize(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL ImageOps.equalize per image and channel: lut[i] = (step // 2 + #pixels below level i) // step with
    # step = (#pixels - #pixels at the highest level) // 255; identity when step is 0.
    k, c, h, w = u.shape
    levels = _levels(u).view(k, c, h * w)  # (k, C, HW)
    hist = torch.zeros(k, c, 256, device=u.device, dtype=torch.int64)
    hist.scatter_add_(2, levels, torch.ones_like(levels))  # (k, C, 256)
    top_count = hist.gather(2, levels.amax(dim=2, keepdim=True))  # (k, C, 1)
    step = torch.div(h * w - top_count, 255, rounding_mode="floor")
    below = torch.cumsum(hist, dim=2) - hist  # pixels strictly below each level
    safe_step = torch.where(step > 0, step, torch.ones_like(step))
    lut = torch.div(torch.div(step, 2, rounding_mode="floor") + below, safe_step, rounding_mode="floor")
    mapped = lut.clamp(0, 255).gather(2, levels)
    out = torch.where(step > 0, mapped, levels)
    return (out.to(u.dtype) / 255.0).view(k, c, h, w)


def _warp(u: torch.Tensor, matrix: torch.Tensor, shift: torch.Tensor, fill: float, mode: str) -> torch.Tensor:
    """Resample with the output-to-input pixel map `input = matrix @ output + shift` ((k, 2, 2), (k, 2)),
    pixel (x, y) = (column, row) indices; pixels mapped from outside the image get `fill`."""
    h, w = u.shape[-2:]
    # affine_grid works in normalised coordinates: pixel = S norm + c with S = diag(w/2, h/2) and c the
    # centre, so theta = [S^-1 A S | S^-1 (A c + b - c)]. Python scalars: no host-to-device copies.
    sx, sy, cx, cy = w / 2.0, h / 2.0, (w - 1) / 2.0, (h - 1) / 2.0
    a00, a01, a10, a11 = matrix[:, 0, 0], matrix[:, 0, 1], matrix[:, 1, 0], matrix[:, 1, 1]
    row_x = torch.stack([a00, a01 * (sy / sx), (a00 * cx + a01 * cy + shift[:, 0] - cx) / sx], -1)
    row_y = torch.stack([a10 * (sx / sy), a11, (a10 * cx + a11 * cy + shift[:, 1] - cy) / sy], -1)
    theta = torch.stack([row_x, row_y], 1)  # (k, 2, 3)
    grid = F.affine_grid(theta, list(u.shape), align_corners=False)
    # Zero padding of (u - fill), shifted back: the outside reads as `fill`.
    return (F.grid_sample(u - fill, grid, mode=mode, padding_mode="zeros", align_corners=False) + fill).clamp(
        0.0, 1.0
    )


def _eye(m: torch.Tensor) -> torch.Tensor:
    return torch.eye(2, device=m.device, dtype=m.dtype).expand(m.shape[0], 2, 2).clone()


def _shear(axis: int, mode: str) -> Op:
    def shear(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
        # PIL AFFINE (1, m, 0, 0, 1, 0): x_in = x + m * y (and the y analogue) in PIL's pixel-corner
        # coordinates; in pixel-index coordinates (centres at integers) that adds m / 2.
        matrix = _eye(m)
        matrix[:, axis, 1 - axis] = m
        shift = torch.zeros(m.shape[0], 2, device=m.device, dtype=m.dtype)
        shift[:, axis] = 0.5 * m
        return _warp(u, matrix, shift, fill, mode)

    return shear


def _translate(axis: int) -> Op:
    def translate(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
        shift = torch.zeros(m.shape[0], 2, device=m.device, dtype=m.dtype)
        shift[:, axis] = m  # pixels; PIL AFFINE (1, 0, t, 0, 1, 0): x_in = x + t
        return _warp(u, _eye(m), shift, fill, "nearest")

    return translate


def _rotate(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL rotate(degrees): counter-clockwise about the centre, nearest neighbour. With rows growing
    # downwards the output-to-input map is [[cos, -sin], [sin, cos]] about the centre.
    h, w = u.shape[-2:]
    angle = torch.deg2rad(m)
    cos, sin = torch.cos(angle), torch.sin(angle)
    matrix = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (k, 2, 2)
    cx, cy = (w - 1) / 2.0, (h - 1) / 2.0
    shift = torch.stack([cx - (cos * cx - sin * cy), cy - (sin * cx + cos * cy)], -1)  # about the centre
    return _warp(u, matrix, shift, fill, "nearest")


def _identity(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return u


# Every op either policy may pick; index = op id in a plan.
_OPS: dict[str, Op] = {
    "identity": _identity,
    "shear_x": _shear(0, "bicubic"),
    "shear_y": _shear(1, "bicubic"),
    "translate_x": _translate(0),
    "translate_y": _translate(1),
    "rotate": _rotate,
    "brightness": _brightness,
    "color": _color,
    "contrast": _contrast,
    "sharpness": _sharpness,
    "posterize": _posterize,
    "solarize": _solarize,
    "autocontrast": _autocontrast,
    "equalize": _equalize,
    "invert": _invert,
}
_OP_NAMES = tuple(_OPS)
_OP_ID = {name: i for i, name in enumerate(_OP_NAMES)}


@dataclass(frozen=True)
class _Plan:
    """Per-sample choices of one batch (CPU tensors): `slots` of (op id (N,), signed magnitude (N,),
    applied (N,)), run slot after slot, as the two ops of a sub-policy."""

    slots: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    fill: float


@dataclass(frozen=True)
class _Step:
    """One op on the samples that drew it: their rows are rows[start:stop] of the packed schedule."""

    op: str
    start: int
    stop: int
    fill: float


def _schedule(plan: _Plan) -> tuple[list[_Step], torch.Tensor, torch.Tensor]:
    """The plan as steps plus packed row indices and magnitudes, all worked out on the CPU (no device sync)."""
    steps: list[_Step] = []
    rows: list[torch.Tensor] = [torch.zeros(0, dtype=torch.long)]
    magnitudes: list[torch.Tensor] = [torch.zeros(0)]
    start = 0
    for op_ids, slot_magnitudes, applied in plan.slots:
        for op_id in torch.unique(op_ids[applied]).tolist():
            if _OP_NAMES[op_id] == "identity":
                continue
            chosen = torch.nonzero(applied & (op_ids == op_id)).squeeze(1)
            steps.append(_Step(_OP_NAMES[op_id], start, start + len(chosen), plan.fill))
            rows.append(chosen)
            magnitudes.append(slot_magnitudes[chosen].to(torch.float32))
            start += len(chosen)
    return steps, torch.cat(rows), torch.cat(magnitudes)


@dataclass(frozen=True)
class _Draws:
    """One batch's random choices: op steps with their packed rows and magnitudes, crop offsets (N, 2)
    and flips (N,) or None where the dataset must not be flipped."""

    steps: list[_Step]
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


def _random_signs(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 2, shape, generator=generator).to(torch.float32) * 2.0 - 1.0


# --- AutoAugment: the CIFAR-10 policy of Compact-Transformers (utils/autoaug.py, after DeepVoltaire) -------
# 25 sub-policies (op, probability, magnitude index) x 2; one drawn per sample, each op applied with its
# probability. Magnitudes, index 0..9: shear 0..0.3, translate 0..150/331 of the side, rotate 0..30 degrees
# (counter-clockwise only, as there), colour/contrast/sharpness/brightness factor 1 +- 0..0.9, posterize
# round(8..4) bits, solarize threshold 256..0; signs are random for shear, translate and the four enhance ops.
# Fill of shear/translate/rotate: grey 128 as there; shear bicubic, translate and rotate nearest (PIL's defaults).
_AUTO_AUGMENT_CIFAR10: tuple[tuple[tuple[str, float, int], tuple[str, float, int]], ...] = (
    (("invert", 0.1, 7), ("contrast", 0.2, 6)),
    (("rotate", 0.7, 2), ("translate_x", 0.3, 9)),
    (("sharpness", 0.8, 1), ("sharpness", 0.9, 3)),
    (("shear_y", 0.5, 8), ("translate_y", 0.7, 9)),
    (("autocontrast", 0.5, 8), ("equalize", 0.9, 2)),
    (("shear_y", 0.2, 7), ("posterize", 0.3, 7)),
    (("color", 0.4, 3), ("brightness", 0.6, 7)),
    (("sharpness", 0.3, 9), ("brightness", 0.7, 9)),
    (("equalize", 0.6, 5), ("equalize", 0.5, 1)),
    (("contrast", 0.6, 7), ("sharpness", 0.6, 5)),
    (("color", 0.7, 7), ("translate_x", 0.5, 8)),
    (("equalize", 0.3, 7), ("autocontrast", 0.4, 8)),
    (("translate_y", 0.4, 3), ("sharpness", 0.2, 6)),
    (("brightness", 0.9, 6), ("color", 0.2, 8)),
    (("solarize", 0.5, 2), ("invert", 0.0, 3)),
    (("equalize", 0.2, 0), ("autocontrast", 0.6, 0)),
    (("equalize", 0.2, 8), ("equalize", 0.6, 4)),
    (("color", 0.9, 9), ("equalize", 0.6, 6)),
    (("autocontrast", 0.8, 4), ("solarize", 0.2, 8)),
    (("brightness", 0.1, 3), ("color", 0.7, 0)),
    (("solarize", 0.4, 5), ("autocontrast", 0.9, 3)),
    (("translate_y", 0.9, 9), ("translate_y", 0.7, 9)),
    (("autocontrast", 0.9, 2), ("solarize", 0.8, 3)),
    (("equalize", 0.8, 8), ("invert", 0.1, 3)),
    (("translate_y", 0.7, 9), ("autocontrast", 0.9, 1)),
)
_AUTO_AUGMENT_SIGNED = frozenset(
    {"shear_x", "shear_y", "translate_x", "translate_y", "color", "contrast", "sharpness", "brightness"}
)
_AUTO_AUGMENT_FILL = 128.0 / 255.0


def _auto_augment_magnitude(op: str, index: int, image_size: int) -> float:
    ranges = {
        "shear_x": np.linspace(0.0, 0.3, 10),
        "shear_y": np.linspace(0.0, 0.3, 10),
        "translate_x": np.linspace(0.0, 150.0 / 331.0, 10) * image_size,
        "translate_y": np.linspace(0.0, 150.0 / 331.0, 10) * image_size,
        "rotate": np.linspace(0.0, 30.0, 10),
        "color": np.linspace(0.0, 0.9, 10),
        "posterize": np.round(np.linspace(8, 4, 10)),
        "solarize": np.linspace(256.0, 0.0, 10),
        "contrast": np.linspace(0.0, 0.9, 10),
        "sharpness": np.linspace(0.0, 0.9, 10),
        "brightness": np.linspace(0.0, 0.9, 10),
    }
    return float(ranges[op][index]) if op in ranges else 0.0


def _auto_augment_plan(n: int, image_size: int, generator: torch.Generator) -> _Plan:
    table = _AUTO_AUGMENT_CIFAR10
    op_ids = torch.tensor([[_OP_ID[op] for op, _, _ in sub] for sub in table])  # (25, 2)
    probabilities = torch.tensor([[p for _, p, _ in sub] for sub in table])
    magnitudes = torch.tensor(
        [[_auto_augment_magnitude(op, index, image_size) for op, _, index in sub] for sub in table]
    )
    signed = torch.tensor([[op in _AUTO_AUGMENT_SIGNED for op, _, _ in sub] for sub in table])
    chosen = torch.randint(0, len(table), (n,), generator=generator)  # (N,) one sub-policy per sample
    draws = torch.rand(n, 2, generator=generator)
    signs = _random_signs((n, 2), generator)
    slots = []
    for slot in range(2):
        sign = torch.where(signed[chosen, slot], signs[:, slot], torch.ones(n))
        slots.append(
            (
                op_ids[chosen, slot],
                magnitudes[chosen, slot] * sign,
                draws[:, slot] < probabilities[chosen, slot],
            )
        )
    return _Plan(slots, fill=_AUTO_AUGMENT_FILL)


# --- RandAugment: torchvision.transforms.RandAugment's defaults ---------------------------------------------
# num_ops = 2 ops per sample, each drawn uniformly from the 14 below and always applied; magnitude bin 9 of
# 31: shear 0.09, translate 150/331 * side * 9/30 px (4.35 px at 32 px), rotate 9 degrees, brightness/colour/
# contrast/sharpness factor 1 +- 0.27, posterize 7 bits, solarize threshold 178.5; random sign on shear,
# translate, rotate and the enhance ops. Fill black (torchvision's default), nearest interpolation throughout.
_RAND_AUGMENT_OPS = (
    "identity",
    "shear_x",
    "shear_y",
    "translate_x",
    "translate_y",
    "rotate",
    "brightness",
    "color",
    "contrast",
    "sharpness",
    "posterize",
    "solarize",
    "autocontrast",
    "equalize",
)
_RAND_AUGMENT_NUM_OPS, _RAND_AUGMENT_MAGNITUDE, _RAND_AUGMENT_BINS = 2, 9, 31
_RAND_AUGMENT_SIGNED = frozenset(
    {
        "shear_x",
        "shear_y",
        "translate_x",
        "translate_y",
        "rotate",
        "brightness",
        "color",
        "contrast",
        "sharpness",
    }
)


def _rand_augment_magnitude(op: str, image_size: int) -> float:
    fraction = _RAND_AUGMENT_MAGNITUDE / (_RAND_AUGMENT_BINS - 1)
    if op in ("shear_x", "shear_y"):
        return 0.3 * fraction
    if op in ("translate_x", "translate_y"):
        return 150.0 / 331.0 * image_size * fraction
    if op == "rotate":
        return 30.0 * fraction
    if op in ("brightness", "color", "contrast", "sharpness"):
        return 0.9 * fraction
    if op == "posterize":
        return float(8 - round(_RAND_AUGMENT_MAGNITUDE / ((_RAND_AUGMENT_BINS - 1) / 4)))
    if op == "solarize":
        return 255.0 * (1.0 - fraction)
    return 0.0


def _rand_augment_plan(n: int, image_size: int, generator: torch.Generator) -> _Plan:
    ops = _RAND_AUGMENT_OPS
    op_ids = torch.tensor([_OP_ID[op] for op in ops])
    magnitudes = torch.tensor([_rand_augment_magnitude(op, image_size) for op in ops])
    signed = torch.tensor([op in _RAND_AUGMENT_SIGNED for op in ops])
    chosen = torch.randint(0, len(ops), (n, _RAND_AUGMENT_NUM_OPS), generator=generator)  # (N, num_ops)
    signs = _random_signs((n, _RAND_AUGMENT_NUM_OPS), generator)
    always = torch.ones(n, dtype=torch.bool)
    slots = []
    for slot in range(_RAND_AUGMENT_NUM_OPS):
        pick = chosen[:, slot]
        sign = torch.where(signed[pick], signs[:, slot], torch.ones(n))
        slots.append((op_ids[pick], magnitudes[pick] * sign, always))
    return _Plan(slots, fill=0.0)
