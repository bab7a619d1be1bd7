"""A few seconds of one candidate setting's training steps, timed: what workers.trials.throughput decides by.

A `ThroughputRun` is the trial the study would run (TrainingRun for one seed, SeedBatchedRun for k stacked
seeds, with the candidate's compile mode), stepped through the loop's own `train_seeds` in short chunks, so
what is timed is the training step a trial takes: the batch gather, augmentation, the (vmapped) forward and
backward, clipping, AdamW and the schedule. Evaluation is not timed: it is the same for every candidate.

- `warm_up()`: the first steps, where torch.compile compiles and CUDA graphs are captured;
- `window(seconds, start_at=...)`: steps until `seconds` have passed from `start_at` (a wall-clock time, so
  the trials packed on one GPU can step one common window), counting every seed's samples;
- `overhead_s(step_s)`: what a trial of this setting pays before its steady steps: building its models,
  and the warm-up beyond what its steps would take at the steady rate (the compile, the capture).

`measure_throughput` is all three for one process. `ProbeProcess` is one probe trial process of the
measuring schedule (workers.trials.throughput.measure_settings): the driver (workers.driver.throughput)
runs it as a Ray actor on a GPU node only; on CPU it runs too (the tests), and measures CPU steps.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from studies.trial_config import ORCHESTRATION_KEYS, Key, trial_seeds
from workers.training.config import TrainConfig
from workers.trials.throughput import WARMUP_STEPS, WINDOW_S, Prepared, Stepped

__all__ = [
    "CHUNK_STEPS",
    "ProbeProcess",
    "ThroughputResult",
    "ThroughputRun",
    "Window",
    "measure_throughput",
]

CHUNK_STEPS = 5  # steps between host syncs (each chunk ends with one, as a training epoch does)
MAX_START_WAIT_S = 5.0  # the longest a window waits for its common start


@dataclass(frozen=True)
class Window:
    samples: int  # every seed's samples together
    seconds: float
    steps: int

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def step_s(self) -> float:
        return self.seconds / self.steps if self.steps else 0.0


@dataclass(frozen=True)
class ThroughputResult:
    samples_per_s: float  # every seed of the trial together, steady steps
    overhead_s: float  # build + warm-up beyond the steady rate: paid once per trial
    step_s: float  # one steady step
    samples_per_seed_epoch: int  # samples one seed trains in one of the study's epochs
    peak_bytes: int  # reserved CUDA memory at the end (0 on CPU)
    device: str  # torch.cuda.get_device_name, or "cpu"


class ThroughputRun:
    """One candidate trial, built and ready to be stepped (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, seeds: Sequence[int]) -> None:
        from workers.training.loop import TrainingRun
        from workers.training.seed_batch import SeedBatchedRun

        if not seeds:
            raise ValueError("a throughput probe needs at least one seed")
        cfg = replace(cfg, progress=False, seed=int(seeds[0]))
        started = time.perf_counter()
        self.run = SeedBatchedRun(cfg, seeds) if len(seeds) > 1 else TrainingRun(cfg)
        self.build_s = time.perf_counter() - started
        self.cfg = cfg
        self.num_seeds = len(seeds)
        # The study's epoch, before the probe shortens it: what one seed trains per epoch.
        self.samples_per_seed_epoch = min(
            self.run.steps_per_epoch * cfg.batch_size, len(self.run.bundle.train)
        )
        # Whole batches only: the epoch's last, shorter batch would be another graph to compile.
        self._whole_batches = max(1, len(self.run.bundle.train) // cfg.batch_size)
        self.warmup_s = 0.0
        self.warmup_steps = 0

    @property
    def device(self) -> torch.device:
        return self.run.device

    def _steps(self, count: int) -> int:
        """`count` training steps (fewer when an epoch has fewer whole batches); returns every seed's samples."""
        self.run.steps_per_epoch = max(1, min(count, self._whole_batches))
        _, samples = self.run.train_seeds()  # ends with a host sync (the epoch's loss)
        return samples * self.num_seeds

    def warm_up(self, steps: int = WARMUP_STEPS) -> float:
        """The first `steps` steps (compile, capture); returns their seconds."""
        started = time.perf_counter()
        done = 0
        while done < steps:
            chunk = min(steps - done, self._whole_batches)
            self._steps(chunk)
            done += chunk
        self.warmup_s = time.perf_counter() - started
        self.warmup_steps = done
        return self.warmup_s

    def window(
        self, seconds: float = WINDOW_S, *, start_at: float | None = None, chunk_steps: int = CHUNK_STEPS
    ) -> Window:
        """Steps in chunks from wall-clock `start_at` (now when None) until `seconds` have passed."""
        if start_at is not None:  # capped: a node whose clock is off by more starts at once
            time.sleep(min(max(0.0, start_at - time.time()), MAX_START_WAIT_S))
        chunk = max(1, min(chunk_steps, self._whole_batches))
        started = time.perf_counter()
        samples = steps = 0
        while True:
            samples += self._steps(chunk)
            steps += chunk
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return Window(samples=samples, seconds=elapsed, steps=steps)

    def overhead_s(self, step_s: float) -> float:
        """Build and warm-up beyond `warmup_steps` steady steps of `step_s`: what each trial pays once."""
        return max(0.0, self.build_s + self.warmup_s - self.warmup_steps * step_s)

    def peak_bytes(self) -> int:
        if self.device.type != "cuda":
            return 0
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_reserved())

    def close(self) -> None:
        """Give the run's memory back (and, for a compiled run, its graphs) before the next candidate."""
        compiled = self.cfg.compile != "none"
        cuda = self.device.type == "cuda"
        del self.run
        gc.collect()
        if compiled:
            torch._dynamo.reset()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def measure_throughput(
    cfg: TrainConfig,
    seeds: Sequence[int],
    *,
    warmup_steps: int = WARMUP_STEPS,
    window_s: float = WINDOW_S,
    chunk_steps: int = CHUNK_STEPS,
) -> ThroughputResult:
    """One trial of `seeds` under `cfg` (its device and compile mode) alone: build, warm up, one window."""
    run = ThroughputRun(cfg, seeds)
    try:
        run.warm_up(warmup_steps)
        window = run.window(window_s, chunk_steps=chunk_steps)
        return ThroughputResult(
            samples_per_s=window.samples_per_s,
            overhead_s=run.overhead_s(window.step_s),
            step_s=window.step_s,
            samples_per_seed_epoch=run.samples_per_seed_epoch,
            peak_bytes=run.peak_bytes(),
            device=device_name(run.device),
        )
    finally:
        run.close()


class ProbeProcess:
    """One probe trial process: loads the dataset once, then builds, warms up and steps one candidate trial
    (a study trial config with its seeds and compile mode) at a time."""

    def __init__(self, base_config: Mapping[str, Any], device: str = "cuda") -> None:
        from workers.plugins.activate import activate_extensions
        from workers.training.run_parts import load_bundle

        self.device = device
        activate_extensions(base_config.get(Key.EXTENSIONS))  # a plugin's norms and datasets, as a trial
        # Before the bound starts, what a reused trial process has already: the dataset (memoised in this
        # process) and a first eager step (CUDA context, library handles, first-call work), so the first
        # candidate measured is not charged for them.
        cfg = TrainConfig.from_trial_config(
            {**_train_fields(base_config), Key.COMPILE: "none"}, device=device
        )
        load_bundle(cfg)
        first = ThroughputRun(cfg, [cfg.seed])
        first.warm_up(2)
        first.close()
        self.run: ThroughputRun | None = None

    def prepare(self, config: Mapping[str, Any]) -> Prepared:
        """Build `config`'s trial and warm it up; a failure (out of memory, a compile error) is returned."""
        self.release()
        try:
            cfg = TrainConfig.from_trial_config(_train_fields(config), device=self.device)
            self.run = ThroughputRun(cfg, trial_seeds(config))
            self.run.warm_up(WARMUP_STEPS)
        except Exception as exc:  # this candidate is not measured, and says why
            self.release()
            return Prepared(ok=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        return Prepared(
            ok=True,
            build_s=self.run.build_s,
            warmup_s=self.run.warmup_s,
            warmup_steps=self.run.warmup_steps,
            samples_per_seed_epoch=self.run.samples_per_seed_epoch,
        )

    def window(self, start_at: float, seconds: float) -> Stepped:
        assert self.run is not None, "prepare a candidate first"
        window = self.run.window(seconds, start_at=start_at)
        return Stepped(samples=window.samples, seconds=window.seconds, steps=window.steps)

    def release(self) -> None:
        if self.run is not None:
            run, self.run = self.run, None
            run.close()


def _train_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in ORCHESTRATION_KEYS}
