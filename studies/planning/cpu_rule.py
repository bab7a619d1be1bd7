"""A stated prior for how long a ViT-Lite trial trains on one CPU core, where no trial of it ran here.

    seconds per optimizer step = 5.3 ms x blocks + 3 x forward FLOPs of the batch / 41 GFLOP/s

Two constants fitted to two CPU measurements of this repository, both on one thread of a 2-CPU x86_64
machine: the paper-size ViT-Lite (8 blocks, dim 128) trained 115 samples/s at batch 128 (BENCHMARKS.md,
"Training throughput"), and the quick study's 15 tiny trials (2 blocks, dim 32, batch 64, 10 epochs on
digits) trained for 47 s in all (BENCHMARKS.md, "Orchestration overhead"). Small models are bound by the
per-layer work of each step, large ones by their FLOPs. Checked against a third: the catalog's MNIST cpu
study (4 blocks, dim 64, 20 epochs on mnist_5k) measured 65-90 s per trial where this rule gives about 55:
it runs low by up to a third. Evaluation passes are left out (as the GPU cost model leaves them out); each
trial adds 1 s of setup and close (BENCHMARKS.md: 0.8 to 2.0 s per trial outside training).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from studies.spec import StudySpec

__all__ = ["CPU_RULE", "PER_TRIAL_OVERHEAD_S", "CpuStepTime", "cpu_seconds_per_epoch"]

CPU_RULE = (
    "s per step on one core = 5.3 ms x blocks + 3 x forward FLOPs / 41 GFLOP/s, fitted to BENCHMARKS.md's "
    "ViT-Lite CPU runs (it ran up to a third low on the catalog's MNIST cpu study)"
)
PER_TRIAL_OVERHEAD_S = 1.0
_SECONDS_PER_BLOCK = 5.3e-3
_FLOPS_PER_SECOND = 41e9
_MLP_RATIO = 2.0  # models/config.py's default width expansion

# The ViT-Lite presets' shapes (models/presets.py; a test checks them against it).
VIT_PRESETS: dict[str, dict[str, int]] = {
    "vit_lite_paper": {"depth": 8, "dim": 128, "patch_size": 4},
    "vit_lite_tiny": {"depth": 2, "dim": 32, "patch_size": 2},
}
# Training images per epoch (the training pool less the validation carve, and less a test carve where the
# source has no test split: workers/data) and the image side, per image dataset.
TRAINING_IMAGES: dict[str, tuple[int, int]] = {
    "digits": (1437, 8),
    "digits_c": (1437, 8),
    "mnist_5k": (4000, 28),
    "mnist": (54_000, 28),
    "fashion_mnist": (54_000, 28),
    "fashion_mnist_c": (54_000, 28),
    "svhn": (65_931, 32),
    "cifar10": (45_000, 32),
    "cifar100": (45_000, 32),
    "cifar10_c": (45_000, 32),
    "cifar10_c_hendrycks": (45_000, 32),
}


@dataclass(frozen=True)
class CpuStepTime:
    seconds_per_epoch: float | None  # one seed, one core; None: the rule does not cover the spec
    reason: str


def _forward_flops(*, depth: int, dim: int, tokens: int, mlp_ratio: float) -> float:
    """Multiply-adds x 2 of one sample's forward through the blocks: the qkv, projection and MLP matrices
    per token, and the attention scores and mix per token pair."""
    per_token = 2.0 * (4.0 + 2.0 * mlp_ratio) * dim * dim
    return depth * (tokens * per_token + 4.0 * tokens * tokens * dim)


def cpu_seconds_per_epoch(spec: StudySpec) -> CpuStepTime:
    preset = spec.model.preset
    if preset is None:
        return CpuStepTime(
            None, "the spec leaves the model to the dataset's default: name a preset for the CPU prior"
        )
    if preset not in VIT_PRESETS:
        return CpuStepTime(None, f"the CPU prior covers ViT-Lite only, not {preset}")
    if spec.dataset not in TRAINING_IMAGES:
        return CpuStepTime(None, f"the CPU prior does not know the training-set size of {spec.dataset}")
    shape = {**VIT_PRESETS[preset], **spec.model.overrides}
    examples, side = TRAINING_IMAGES[spec.dataset]
    depth, dim, patch = int(shape["depth"]), int(shape["dim"]), int(shape["patch_size"])
    tokens = (side // patch) ** 2 + 1
    flops = _forward_flops(
        depth=depth, dim=dim, tokens=tokens, mlp_ratio=float(shape.get("mlp_ratio", _MLP_RATIO))
    )
    batch = spec.budget.batch_size
    step = _SECONDS_PER_BLOCK * depth + 3.0 * flops * batch / _FLOPS_PER_SECOND
    steps = math.ceil(examples / batch)
    return CpuStepTime(
        steps * step,
        f"{examples:,} training images per epoch, {tokens} tokens, {depth} blocks of dim {dim}, batch {batch}: "
        f"{step * 1000:.0f} ms per step",
    )
