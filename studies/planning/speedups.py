"""How much faster than one eager trial a study's trials use a GPU: seed batching, packing and
torch.compile, where BENCHMARKS.md measured them.

studies/catalog/cost.py prices one eager trial at a time. BENCHMARKS.md ("GPU throughput and kernels")
also measured, on an H200 with the paper-size ViT-Lite at 32 x 32 x 3 and batch 128, the aggregate
samples/s of other ways to run trials, as a multiple of one eager trial of the same method. A plan divides
GPU-hours by that multiple only for a configuration that was measured (the same seeds per trial, compile
mode and trials per GPU); any other is priced as one eager trial at a time and says so. Where two runs
measured the same configuration, the lower multiple is taken (the 2026-12-04 run stacked AutoNorm-S seeds
slower than the 2026-11-30 one, for reasons not investigated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from studies.datasets import dataset_record
from studies.spec import StudySpec

__all__ = ["GATED_METHODS", "MEASURED_SPEEDUPS", "Speedup", "speedup", "trials_per_gpu"]

# The methods studies/catalog/cost.py prices at AutoNorm-S's measured rate (a gate beside the norm); the rest
# at FrozenLN's. A test checks this against the cost model.
GATED_METHODS = frozenset({"autonorm_s", "autonorm", "random_selector"})

# (rate family, seeds stacked in one trial, budget.compile, trials sharing one GPU) -> aggregate samples/s
# over one eager trial's. H200, vit_lite_paper, 32 x 32 x 3, batch 128, bf16 (BENCHMARKS.md).
MEASURED_SPEEDUPS: dict[tuple[str, int, str, int], float] = {
    ("frozen_ln", 1, "default", 1): 1.1,  # 1.3 on 2026-11-30, 1.1 on 2026-12-04
    ("autonorm_s", 1, "default", 1): 1.4,  # 1.8, 1.4
    ("frozen_ln", 1, "reduce-overhead", 1): 2.5,  # 2.5, 2.8 (3.4 with the whole-layer kernel on)
    ("autonorm_s", 1, "reduce-overhead", 1): 3.6,  # 3.6, 4.1
    ("frozen_ln", 8, "none", 1): 2.7,  # 3.3, 2.7
    ("autonorm_s", 8, "none", 1): 2.0,  # 4.3, 2.0
    ("frozen_ln", 32, "none", 1): 7.2,  # 8.5, 7.2
    ("autonorm_s", 32, "none", 1): 7.9,  # 15.4, 7.9
    ("frozen_ln", 32, "reduce-overhead", 1): 15.3,  # 2026-12-04 only
    ("autonorm_s", 32, "reduce-overhead", 1): 29.1,
    ("frozen_ln", 1, "none", 4): 3.5,  # 4 trial processes on one GPU, 2026-11-30
    ("autonorm_s", 1, "none", 4): 3.7,
    ("frozen_ln", 1, "none", 8): 4.2,
    ("autonorm_s", 1, "none", 8): 5.3,
    ("frozen_ln", 1, "reduce-overhead", 4): 9.1,
    ("autonorm_s", 1, "reduce-overhead", 4): 13.3,
    ("frozen_ln", 1, "reduce-overhead", 8): 9.1,
    ("autonorm_s", 1, "reduce-overhead", 8): 13.8,
    ("frozen_ln", 8, "none", 8): 5.1,  # 8 trials of 8 seeds, packed as resources.gpu: auto packed them
    ("autonorm_s", 8, "none", 8): 12.1,
}
# `resources.gpu: auto` packed 8 trials of 8 seeds per H200 in the measured configuration; elsewhere it
# packs by a peak memory measured at launch, unknown to a plan.
_AUTO_PACKED_TRIALS = 8


@dataclass(frozen=True)
class Speedup:
    factor: float  # GPU-hours are divided by it; 1 where nothing was measured
    measured_as_is: bool  # the spec's model, image size and batch are the benchmark's own
    note: str  # one sentence for the plan's basis


def _family(method: str) -> str:
    return "autonorm_s" if method in GATED_METHODS else "frozen_ln"


def _is_benchmark_configuration(spec: StudySpec) -> bool:
    preset = spec.model.preset or spec.model.backbone(spec.dataset)
    side = dataset_record(spec.dataset).image_side  # None where the cost model prices no epoch
    return (
        preset == "vit_lite_paper"
        and not spec.model.overrides
        and side == 32
        and spec.budget.batch_size == 128
    )


def trials_per_gpu(spec: StudySpec, *, stacked: int) -> int | None:
    """Trials sharing one GPU: 1 / resources.gpu for a fraction; for "auto", the measured packing where the
    spec is the benchmark's configuration, else None (decided at launch from a measured peak memory)."""
    gpu = spec.resources.gpu
    if gpu == "auto":
        if _is_benchmark_configuration(spec) and stacked == 8 and spec.budget.compile == "none":
            return _AUTO_PACKED_TRIALS
        return None
    if gpu <= 0:
        return 1  # CPU trials: what they would take on the GPU, one trial per device
    return max(1, round(1.0 / gpu))


def speedup(spec: StudySpec, method: str, *, stacked: int, phase: Literal["tune", "final"]) -> Speedup:
    """The measured multiple for `method`'s trials of one phase (`stacked` seeds per trial), or 1."""
    compile_mode = spec.budget.compile
    packed = trials_per_gpu(spec, stacked=stacked)
    key = (_family(method), stacked, compile_mode, packed or 1)
    what = (
        f"{phase} trials of {stacked} seed(s), compile {compile_mode}, "
        f"{'packing unknown until launch' if packed is None else f'{packed} per GPU'}"
    )
    if key[1:] == (1, "none", 1):
        return Speedup(1.0, True, f"{what}: one eager trial at a time, as the cost model prices it")
    factor = MEASURED_SPEEDUPS.get(key)
    if factor is None:
        return Speedup(1.0, False, f"{what}: not measured, priced as one eager trial at a time")
    exact = _is_benchmark_configuration(spec) and packed is not None
    where = "measured as is" if exact else "measured on the paper-size ViT-Lite at 32 x 32, applied here"
    return Speedup(factor, exact, f"{what}: {factor:g}x one eager trial ({where})")
