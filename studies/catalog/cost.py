"""What a paper-size study costs on a GPU, predicted from the step rates measured in BENCHMARKS.md.

Only one configuration has been measured: ViT-Lite paper size (8 x 4 x 128, patch 4) on 32 x 32 x 3
inputs, batch 128, bf16, one eager trial on an NVIDIA H200 (benchmarks/gpu.py, 2026-11-30). Every other
figure is extrapolated from it, and says so: other methods take the measured rate of their family
(FrozenLN for the plain norms, AutoNorm-S for the gated ones), other image sizes and depths scale with
the token count and the number of blocks, and backbones that were never timed (the encoder and the
tabular Transformer) get no prediction at all.

Hours count training samples only (evaluation passes are forward-only and left out) and assume no trial
packing; ASHA's count assumes each rung keeps exactly 1 / reduction_factor of the trials.
"""

from __future__ import annotations

from dataclasses import dataclass

from studies.spec import StudySpec

__all__ = ["MEASURED_RATES", "TRAIN_EXAMPLES", "GpuCost", "predicted_gpu_cost"]

# Samples/s of one eager vit_lite_paper trial at 32 x 32 x 3 on an H200 (BENCHMARKS.md, "1 trial, eager").
MEASURED_RATES: dict[str, float] = {"frozen_ln": 5260.0, "autonorm_s": 2278.0}
_GATED = {"autonorm_s", "autonorm", "random_selector"}  # a gate beside the norm: AutoNorm-S's rate
_MEASURED_TOKENS = (32 // 4) ** 2 + 1  # patches + class token
_MEASURED_DEPTH = 8

# Training examples per epoch (the official training split; the validation carve comes out of it).
TRAIN_EXAMPLES: dict[str, tuple[int, int]] = {  # dataset -> (examples, image side)
    "mnist": (60_000, 28),
    "fashion_mnist": (60_000, 28),
    "svhn": (73_257, 32),
    "cifar10": (50_000, 32),
    "cifar100": (50_000, 32),
    "cifar10_c_hendrycks": (50_000, 32),
}


@dataclass(frozen=True)
class GpuCost:
    """Predicted GPU-hours of a study, or why there is no prediction."""

    hours_no_stopping: float | None  # every tuning trial runs its whole budget
    hours_with_asha: float | None  # tuning trials stopped at ASHA's rungs
    measured: bool  # True only when every rate used was measured as is (no extrapolation)
    basis: tuple[str, ...]  # how the figure was made, sentence by sentence


def _rate(method: str, tokens: int, depth: int) -> tuple[float, bool]:
    family = "autonorm_s" if method in _GATED else "frozen_ln"
    rate = MEASURED_RATES[family] * (_MEASURED_TOKENS / tokens) * (_MEASURED_DEPTH / depth)
    return rate, method == family and tokens == _MEASURED_TOKENS and depth == _MEASURED_DEPTH


def _asha_epochs(spec: StudySpec) -> float:
    """Mean epochs a tuning trial runs under ASHA: all reach the first rung, 1/rf of them the next, ..."""
    budget = spec.scheduler.max_t or spec.budget.epochs
    if spec.scheduler.type != "asha":
        return float(budget)
    rf, rung, share, epochs, done = spec.scheduler.reduction_factor, spec.scheduler.grace_period, 1.0, 0.0, 0
    while rung < budget:
        epochs += share * (rung - done)
        done, share, rung = rung, share / rf, int(rung * rf)
    return epochs + share * (budget - done)


def predicted_gpu_cost(spec: StudySpec) -> GpuCost:
    model = spec.model.preset or spec.model.backbone(spec.dataset)
    if not model.startswith("vit_lite") or spec.dataset not in TRAIN_EXAMPLES:
        return GpuCost(
            None,
            None,
            False,
            (f"no GPU step time has been measured for {model} on {spec.dataset}: no prediction",),
        )
    examples, side = TRAIN_EXAMPLES[spec.dataset]
    patch = int(spec.model.overrides.get("patch_size", 4))
    depth = int(spec.model.overrides.get("depth", _MEASURED_DEPTH))
    tokens = (side // patch) ** 2 + 1
    tune_epochs, full = _asha_epochs(spec), spec.budget.epochs
    seconds_plain = seconds_asha = 0.0
    measured = True
    for method in spec.methods:
        rate, exact = _rate(method, tokens, depth)
        measured = measured and exact
        if spec.kind == "grid":
            tuned, rest = 0, len(spec.grid_points(method)) * len(spec.seeds)
        else:
            tuned, rest = (spec.num_samples_for(method) if spec.tunes(method) else 0), len(spec.seeds)
        seconds_plain += (tuned + rest) * full * examples / rate
        seconds_asha += (tuned * tune_epochs + rest * full) * examples / rate
    basis = [
        f"{examples:,} training examples per epoch, {tokens} tokens, {depth} blocks, one eager trial at a time",
        "H200 rates measured for FrozenLN (5,260 samples/s) and AutoNorm-S (2,278) at 65 tokens and 8 blocks",
    ]
    if not measured:
        basis.append(
            "extrapolated: methods, token counts or depths other than the measured ones are scaled from "
            "the measured rates"
        )
    return GpuCost(seconds_plain / 3600, seconds_asha / 3600, measured, tuple(basis))
