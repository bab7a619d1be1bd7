"""How a study's trials use the cluster: each trial's GPU share and how many seeds one trial trains.

The spec may fix both (`resources.gpu`, `resources.seeds_per_trial`) or leave them "auto":

- seeds_per_trial "auto": 1 where trials run on CPU (stacking buys nothing there) or under budget.compile;
  on a GPU, the final or grid seeds of one configuration in balanced batches of at most
  DEFAULT_GPU_SEEDS_PER_TRIAL (a ViT-Lite trial at batch 128 leaves an H200 launch-bound; BENCHMARKS.md
  has the measured gain). A compiled stacked step runs when the spec asks for it (seeds_per_trial > 1
  with budget.compile), but "auto" does not choose it. On an H200, 32 stacked seeds under CUDA graphs ran
  15.3x / 29.1x one eager trial (FrozenLN / AutoNorm-S), against 2.8x / 4.1x for one compiled trial in the
  same run; but the 5-10 seeds a study usually has were not timed compiled, nor against compiled
  single-seed trials packed on one device, which is what "auto" gives under compile today.
- measured (`choose`): on a GPU, a study whose spec leaves seeds_per_trial "auto" and budget.compile
  unset picks its seeds per trial, compile mode and trials per GPU by a short measurement of candidate
  settings (workers.trials.throughput: the rule; workers.driver.throughput: the measurement). Where
  that cannot run, the rules above and below apply.
- gpu "auto": 0 on a cluster without GPUs. Otherwise the driver measures, on a GPU node, the peak memory
  of one trial as the study will run it (its seed batch, every method, the largest width it may take) and
  packs as many trials per GPU as that memory allows: share = 1 / n, n = trials that fit in
  USABLE_DEVICE_FRACTION of the device with MEMORY_HEADROOM over the peak plus a CUDA context each,
  capped at MAX_TRIALS_PER_GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.trials.throughput import ThroughputChoice

__all__ = [
    "DEFAULT_GPU_SEEDS_PER_TRIAL",
    "MAX_TRIALS_PER_GPU",
    "TrialPlan",
    "gpu_share_for",
    "plan_trials",
    "seed_batches",
    "seeds_per_trial_for",
    "trials_run_on_cpu",
]

DEFAULT_GPU_SEEDS_PER_TRIAL = 8
MAX_TRIALS_PER_GPU = 8
MEMORY_HEADROOM = 1.25  # allocator fragmentation and a longer eval batch than the probe saw
CUDA_CONTEXT_BYTES = 600 * 2**20  # each trial process holds its own CUDA context outside torch's pool
USABLE_DEVICE_FRACTION = 0.9


@dataclass(frozen=True)
class TrialPlan:
    """What every trial of a study asks Ray for, and how its final/grid seeds are batched."""

    cpu: float
    gpu: float
    seeds_per_trial: int
    gpu_reason: str  # why this GPU share, in words: shown in the driver log and on the MLflow parent run
    compile_mode: str = "none"  # what every trial's training step runs under (budget.compile, or measured)
    throughput: ThroughputChoice | None = None  # the measurement that chose the three, where one ran

    def describe(self) -> str:
        text = (
            f"{self.cpu:g} CPU and {self.gpu:g} GPU per trial ({self.gpu_reason}); "
            f"{self.seeds_per_trial} seed(s) per final/grid trial; compile {self.compile_mode}"
        )
        if self.throughput is not None:
            text += f"; chosen by throughput: {self.throughput.describe()}"
        return text

    def to_dict(self) -> dict:
        """What the study keeps of its plan (studies.store, the study page)."""
        return {
            "cpu": self.cpu,
            "gpu": self.gpu,
            "seeds_per_trial": self.seeds_per_trial,
            "compile": self.compile_mode,
            "gpu_reason": self.gpu_reason,
            "describe": self.describe(),
            "throughput": None if self.throughput is None else self.throughput.to_dict(),
        }


def seed_batches(seeds: Sequence[int], per_trial: int) -> list[list[int]]:
    """`seeds` in order, cut into the fewest batches of at most `per_trial`, sizes differing by at most one
    (10 seeds at 8 per trial are 5 + 5, not 8 + 2, so the two trials finish together)."""
    if per_trial < 1:
        raise ValueError(f"per_trial must be >= 1, got {per_trial}")
    values = list(seeds)
    if not values:
        return []
    count = math.ceil(len(values) / per_trial)
    base, extra = divmod(len(values), count)
    batches, start = [], 0
    for index in range(count):
        size = base + (1 if index < extra else 0)
        batches.append(values[start : start + size])
        start += size
    return batches


def seeds_per_trial_for(requested: int | str, *, gpu: float, compile_mode: str, num_seeds: int) -> int:
    """The seed batch size: the spec's number, or the "auto" rule of the module docstring."""
    if requested != "auto":
        return int(requested)
    if gpu <= 0 or compile_mode != "none":
        return 1
    return max(1, min(num_seeds, DEFAULT_GPU_SEEDS_PER_TRIAL))


def gpu_share_for(peak_bytes: int, device_bytes: int) -> float:
    """The GPU fraction per trial for a measured peak: 1 / (trials that fit), rounded down to Ray's 1e-4
    resolution so n shares never add up to more than the device."""
    if peak_bytes <= 0 or device_bytes <= 0:
        raise ValueError(f"need positive memory sizes, got peak {peak_bytes} of {device_bytes}")
    need = peak_bytes * MEMORY_HEADROOM + CUDA_CONTEXT_BYTES
    fits = int(device_bytes * USABLE_DEVICE_FRACTION // need)
    trials = max(1, min(MAX_TRIALS_PER_GPU, fits))
    return math.floor(10_000 / trials) / 10_000


def trials_run_on_cpu(gpu: float | str, *, cluster_gpus: float) -> bool:
    """Whether trials asking for `gpu` get none: the spec says 0, or "auto" on a cluster without GPUs (what
    plan_trials resolves it to); known before any trial is measured."""
    return gpu == 0 or (gpu == "auto" and cluster_gpus <= 0)


def plan_trials(
    *,
    cpu: float,
    gpu: float | str,
    seeds_per_trial: int | str,
    compile_mode: str,
    num_seeds: int,
    cluster_gpus: float,
    measure_peak: Callable[[int], tuple[int, int]],
    choose: Callable[[list[int], float], ThroughputChoice | None] | None = None,
) -> TrialPlan:
    """Resolve the "auto" values. `measure_peak(k)` runs one trial of k seeds on a GPU node and returns
    (peak bytes, device bytes); it is called only for gpu "auto" on a cluster with GPUs.

    `choose(trials_per_gpu, gpu_share)`, given where the spec leaves seeds per trial and compile to a
    measurement, is called only where trials get a GPU: with the trials per GPU it may pick from (1 and
    what the memory rule packs for the largest seed batch, or the spec's own share) and the GPU share of
    one probe trial; it returns the measured choice, or None to keep the rules of the module docstring."""
    if gpu != "auto":
        share = float(gpu)
        if choose is not None and share > 0:
            choice = choose([max(1, int(1 / share + 1e-9))], share)
            if choice is not None:
                return _chosen(cpu, share, "set in the spec", choice)
        k = seeds_per_trial_for(seeds_per_trial, gpu=share, compile_mode=compile_mode, num_seeds=num_seeds)
        return TrialPlan(
            cpu=cpu, gpu=share, seeds_per_trial=k, gpu_reason="set in the spec", compile_mode=compile_mode
        )
    if cluster_gpus <= 0:
        k = seeds_per_trial_for(seeds_per_trial, gpu=0.0, compile_mode=compile_mode, num_seeds=num_seeds)
        return TrialPlan(
            cpu=cpu,
            gpu=0.0,
            seeds_per_trial=k,
            gpu_reason="auto: the cluster has no GPU",
            compile_mode=compile_mode,
        )
    k = seeds_per_trial_for(seeds_per_trial, gpu=1.0, compile_mode=compile_mode, num_seeds=num_seeds)
    peak, device = measure_peak(k)
    share = gpu_share_for(peak, device)
    fits = round(1 / share)
    memory = f"a {k}-seed trial peaked at {peak / 2**30:.2f} GiB of a {device / 2**30:.0f} GiB device"
    if choose is not None:
        choice = choose(sorted({1, fits}), share)
        if choice is not None:
            n = choice.setting.trials_per_gpu
            reason = (
                f"auto: {memory}, so up to {fits} trial(s) fit a GPU; {n} trial(s) per GPU measured fastest"
            )
            # n trials per GPU where n <= fits; never more than the memory allows (a kept choice's n)
            return _chosen(cpu, max(share, math.floor(10_000 / n) / 10_000), reason, choice)
    reason = f"auto: {memory}, so {fits} trial(s) share a GPU"
    return TrialPlan(cpu=cpu, gpu=share, seeds_per_trial=k, gpu_reason=reason, compile_mode=compile_mode)


def _chosen(cpu: float, share: float, reason: str, choice: ThroughputChoice) -> TrialPlan:
    return TrialPlan(
        cpu=cpu,
        gpu=share,
        seeds_per_trial=choice.setting.seeds_per_trial,
        gpu_reason=reason,
        compile_mode=choice.setting.compile_mode,
        throughput=choice,
    )
