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

from studies.datasets import dataset_record
from studies.spec import StudySpec

__all__ = [
    "MEASURED_RATES",
    "GpuCost",
    "final_trial_hours",
    "predicted_gpu_cost",
    "tune_phase_hours",
]

# Samples/s of one eager vit_lite_paper trial at 32 x 32 x 3 on an H200 (BENCHMARKS.md, "1 trial, eager").
MEASURED_RATES: dict[str, float] = {"frozen_ln": 5260.0, "autonorm_s": 2278.0}
_GATED = {"autonorm_s", "autonorm", "random_selector"}  # a gate beside the norm: AutoNorm-S's rate
_MEASURED_TOKENS = (32 // 4) ** 2 + 1  # patches + class token
_MEASURED_DEPTH = 8


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


def _no_rate(spec: StudySpec) -> str | None:
    """Why nothing can be predicted for `spec`; None where its backbone and dataset can be priced."""
    model = spec.model.preset or spec.model.backbone(spec.dataset)
    # An epoch is priced from the dataset record's training examples (the official training split; the
    # validation carve comes out of it) and image side, where it states them.
    record = dataset_record(spec.dataset)
    if not model.startswith("vit_lite") or record.train_examples is None or record.image_side is None:
        return f"no GPU step time has been measured for {model} on {spec.dataset}: no prediction"
    return None


def _geometry(spec: StudySpec) -> tuple[int, int, int]:
    """(training examples per epoch, tokens, blocks) of a spec `_no_rate` accepts."""
    record = dataset_record(spec.dataset)
    examples, side = record.train_examples, record.image_side
    assert examples is not None and side is not None, "_no_rate accepts a dataset with its geometry"
    patch = int(spec.model.overrides.get("patch_size", 4))
    depth = int(spec.model.overrides.get("depth", _MEASURED_DEPTH))
    return examples, (side // patch) ** 2 + 1, depth


def _epoch_seconds(spec: StudySpec, method: str) -> tuple[float, bool]:
    """Seconds one trial of `method` takes per epoch, and whether its rate was measured as is."""
    examples, tokens, depth = _geometry(spec)
    rate, exact = _rate(method, tokens, depth)
    return examples / rate, exact


def final_trial_hours(spec: StudySpec) -> dict[str, float] | None:
    """GPU-hours of one final-phase seed of each method, trained for the whole budget (of a grid method:
    every point on that seed), priced as predicted_gpu_cost prices it; None where it predicts nothing.
    A design that trains method m on n_m final seeds costs tune_phase_hours + sum of n_m * this[m]."""
    if _no_rate(spec) is not None:
        return None
    points = {m: len(spec.grid_points(m)) if spec.kind == "grid" else 1 for m in spec.methods}
    return {m: points[m] * spec.budget.epochs * _epoch_seconds(spec, m)[0] / 3600 for m in spec.methods}


def tune_phase_hours(spec: StudySpec) -> float | None:
    """GPU-hours of the tune phase with its trials stopped at ASHA's rungs (as `hours_with_asha` counts
    them); None where nothing is predicted."""
    if _no_rate(spec) is not None:
        return None
    if spec.kind == "grid":
        return 0.0
    epochs = _asha_epochs(spec)
    tuned = [m for m in spec.methods if spec.tunes(m)]
    return sum(spec.num_samples_for(m) * epochs * _epoch_seconds(spec, m)[0] for m in tuned) / 3600


def predicted_gpu_cost(spec: StudySpec) -> GpuCost:
    why_not = _no_rate(spec)
    if why_not is not None:
        return GpuCost(None, None, False, (why_not,))
    examples, tokens, depth = _geometry(spec)
    tune_epochs, full = _asha_epochs(spec), spec.budget.epochs
    seconds_plain = seconds_asha = 0.0
    measured = True
    for method in spec.methods:
        per_epoch, exact = _epoch_seconds(spec, method)
        measured = measured and exact
        if spec.kind == "grid":
            tuned, rest = 0, len(spec.grid_points(method)) * len(spec.seeds)
        else:
            tuned, rest = (spec.num_samples_for(method) if spec.tunes(method) else 0), len(spec.seeds)
        seconds_plain += (tuned + rest) * full * per_epoch
        seconds_asha += (tuned * tune_epochs + rest * full) * per_epoch
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
