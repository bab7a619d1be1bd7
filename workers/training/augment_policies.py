"""The random choices of the AutoAugment and RandAugment policies: per sample, which ops, with which
magnitudes, drawn from the augmenter's generator on the CPU and packed into steps (one op on the samples
that drew it), so applying them needs no device synchronisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from workers.training.augment_ops import OP_ID, OP_NAMES

__all__ = ["Plan", "Step", "auto_augment_plan", "rand_augment_plan", "schedule"]


@dataclass(frozen=True)
class Plan:
    """Per-sample choices of one batch (CPU tensors): `slots` of (op id (N,), signed magnitude (N,),
    applied (N,)), run slot after slot, as the two ops of a sub-policy."""

    slots: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    fill: float


@dataclass(frozen=True)
class Step:
    """One op on the samples that drew it: their rows are rows[start:stop] of the packed schedule."""

    op: str
    start: int
    stop: int
    fill: float


def schedule(plan: Plan) -> tuple[list[Step], torch.Tensor, torch.Tensor]:
    """The plan as steps plus packed row indices and magnitudes, all worked out on the CPU (no device sync)."""
    steps: list[Step] = []
    rows: list[torch.Tensor] = [torch.zeros(0, dtype=torch.long)]
    magnitudes: list[torch.Tensor] = [torch.zeros(0)]
    start = 0
    for op_ids, slot_magnitudes, applied in plan.slots:
        for op_id in torch.unique(op_ids[applied]).tolist():
            if OP_NAMES[op_id] == "identity":
                continue
            chosen = torch.nonzero(applied & (op_ids == op_id)).squeeze(1)
            steps.append(Step(OP_NAMES[op_id], start, start + len(chosen), plan.fill))
            rows.append(chosen)
            magnitudes.append(slot_magnitudes[chosen].to(torch.float32))
            start += len(chosen)
    return steps, torch.cat(rows), torch.cat(magnitudes)


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


def auto_augment_plan(n: int, image_size: int, generator: torch.Generator) -> Plan:
    table = _AUTO_AUGMENT_CIFAR10
    op_ids = torch.tensor([[OP_ID[op] for op, _, _ in sub] for sub in table])  # (25, 2)
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
    return Plan(slots, fill=_AUTO_AUGMENT_FILL)


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


def rand_augment_plan(n: int, image_size: int, generator: torch.Generator) -> Plan:
    ops = _RAND_AUGMENT_OPS
    op_ids = torch.tensor([OP_ID[op] for op in ops])
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
    return Plan(slots, fill=0.0)
