"""Seeds per trial, compile mode and trials per GPU chosen by measured throughput: the rule, the measuring
schedule and the cache.

A GPU study whose spec leaves `resources.seeds_per_trial` "auto" and `budget.compile` unset measures, at its
start, a few seconds of training steps of each candidate setting on a GPU node (workers.driver.throughput
runs workers.trials.throughput_probe there) and trains with the fastest. This module is the torch-free
part: the candidates, the decision, the schedule the candidates are measured in (`measure_settings`, on
any `ProbePool`) and the cache that lets a later study of the same shape skip the measurement.

Candidates: seeds per trial k in {1, min(seeds, 4), min(seeds, 8)} (never more than the
DEFAULT_GPU_SEEDS_PER_TRIAL that the spec's memory rule assumes) x compile in {none, reduce-overhead} x
trials per GPU n in {1, the memory rule's n} (or the spec's own share). Each (k, compile) is measured as n
trial processes stepping together on one GPU, so a candidate's figure is samples/s per GPU: every seed of
every trial on that GPU.

The rule (`decide`):
- a candidate's figure counts what one of its trials pays before its steady steps (building k models, the
  warm-up, torch.compile and CUDA-graph capture: `overhead_s`, measured), amortised over the samples the
  study's trial trains: effective = R * T / (T + overhead_s), where R is the measured samples/s per GPU and
  T = k * samples_per_seed / (R / n) is the time one trial's training takes at that rate;
- the candidates are visited from the simplest (eager before compiled, then fewer seeds per trial, then
  fewer trials per GPU) and one replaces the choice so far only when its effective figure is more than
  TIE_TOLERANCE above it: a tie goes to the simpler setting;
- one eager seed per trial (k = 1, compile none, at any measured n) is always measured first and is the
  first choice, so the choice is never slower than it; without a measured baseline there is no choice
  and the study keeps the spec-time rule (workers.trials.plan.seeds_per_trial_for);
- the compile mode applies to every trial, a compare study's one-seed tuning trials too: where there are
  such trials, a compiled setting is eligible only if one compiled seed per trial (at its n) was measured
  no slower than one eager seed per trial (at that n).

The bound: PROBE_BUDGET_S for every candidate's build, warm-up (compile) and windows together, once the
probe processes have started; candidates are measured in `probe_order` (the baseline first, then the
likeliest winners), and those the bound cuts are kept unmeasured. A cut measurement is cached as such and
measured again, whole, by the next study of the same shape (whose compiles then find torch's on-disk
caches warm); after MAX_PROBE_ATTEMPTS it is kept as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

# The spec-time memory rule's cap (studies.spec.memory), which workers.trials.plan's equals (a test checks).
from studies.sizing import DEFAULT_GPU_SEEDS_PER_TRIAL

__all__ = [
    "CACHE_FILE_NAME",
    "COMPILE_CANDIDATES",
    "MAX_PROBE_ATTEMPTS",
    "PROBE_BUDGET_S",
    "TIE_TOLERANCE",
    "WARMUP_STEPS",
    "WINDOW_S",
    "CachedProbe",
    "Measured",
    "Measurement",
    "Prepared",
    "ProbePool",
    "Setting",
    "Stepped",
    "ThroughputCache",
    "ThroughputChoice",
    "decide",
    "measure_settings",
    "probe_order",
    "seed_candidates",
]

COMPILE_CANDIDATES = ("none", "reduce-overhead")
PROBE_BUDGET_S = 60.0  # every candidate's build, warm-up (compile) and windows together, once the probes run
TIE_TOLERANCE = 0.05  # a more complex setting must be more than 5 % faster: measurement noise is a tie
MAX_PROBE_ATTEMPTS = 2  # a measurement cut short by the bound is retried once by a later study, then kept
CACHE_FILE_NAME = "throughput_probe.json"  # under the data dir
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class Setting:
    """How a study's trials run: k seeds stacked per trial, the compile mode, n trials sharing one GPU."""

    seeds_per_trial: int
    compile_mode: str
    trials_per_gpu: int

    @property
    def is_baseline(self) -> bool:
        """One eager seed per trial: what every other setting must beat."""
        return self.seeds_per_trial == 1 and self.compile_mode == "none"

    def simplicity(self) -> tuple[bool, int, int]:
        """Sort key, simplest first: eager before compiled, fewer seeds per trial, fewer trials per GPU."""
        return (self.compile_mode != "none", self.seeds_per_trial, self.trials_per_gpu)

    def label(self) -> str:
        return (
            f"{self.seeds_per_trial} seed(s) per trial, compile {self.compile_mode}, "
            f"{self.trials_per_gpu} trial(s) per GPU"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "seeds_per_trial": self.seeds_per_trial,
            "compile": self.compile_mode,
            "trials_per_gpu": self.trials_per_gpu,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Setting:
        return cls(int(data["seeds_per_trial"]), str(data["compile"]), int(data["trials_per_gpu"]))


@dataclass(frozen=True)
class Measurement:
    """One candidate as measured: samples/s per GPU (None: not measured, `note` says why) and what one of
    its trials pays before its steady steps."""

    setting: Setting
    samples_per_s: float | None
    overhead_s: float = 0.0
    note: str = ""

    @property
    def measured(self) -> bool:
        return self.samples_per_s is not None and self.samples_per_s > 0

    def effective_samples_per_s(self, samples_per_seed: float) -> float:
        """samples/s per GPU with each trial's overhead counted once over the samples it trains (0 when not
        measured); `samples_per_seed` <= 0 counts no overhead."""
        if not self.measured:
            return 0.0
        rate = float(self.samples_per_s or 0.0)
        if samples_per_seed <= 0 or self.overhead_s <= 0:
            return rate
        per_trial_rate = rate / self.setting.trials_per_gpu
        train_s = self.setting.seeds_per_trial * samples_per_seed / per_trial_rate
        return rate * train_s / (train_s + self.overhead_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.setting.to_dict(),
            "samples_per_s": self.samples_per_s,
            "overhead_s": self.overhead_s,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        rate = data.get("samples_per_s")
        return cls(
            Setting.from_dict(data),
            None if rate is None else float(rate),
            float(data.get("overhead_s") or 0.0),
            str(data.get("note") or ""),
        )


def seed_candidates(num_seeds: int) -> list[int]:
    """k in {1, min(seeds, 4), min(seeds, 8)}: at most what the spec's memory rule assumes a trial stacks."""
    cap = max(1, min(num_seeds, DEFAULT_GPU_SEEDS_PER_TRIAL))
    return sorted({1, min(cap, 4), cap})


def probe_order(num_seeds: int) -> list[tuple[int, str]]:
    """The (seeds per trial, compile) pairs in the order they are measured, so the bound cuts the least
    promising: the baseline, the largest eager stack, the largest compiled stack, one compiled seed, then
    the middle stack eager and compiled."""
    ks = seed_candidates(num_seeds)
    largest, middle = ks[-1], ks[len(ks) // 2]
    compiled = COMPILE_CANDIDATES[1]
    order = [
        (1, "none"),
        (largest, "none"),
        (largest, compiled),
        (1, compiled),
        (middle, "none"),
        (middle, compiled),
    ]
    return list(dict.fromkeys(order))


def decide(
    measurements: Iterable[Measurement], *, samples_per_seed: float, tuning_trials: bool = False
) -> Setting | None:
    """The setting to train with (the module docstring's rule), or None without a measured baseline.

    `tuning_trials`: the study also runs one-seed tuning trials, under the same compile mode and trials
    per GPU; then a compiled setting is eligible only if one compiled seed per trial at its trials per GPU
    was measured and is not slower than one eager seed per trial there, so the tuning trials never lose."""
    measured = [m for m in measurements if m.measured]
    eligible = sorted(
        (m for m in measured if not tuning_trials or _tuning_keeps_pace(m, measured, samples_per_seed)),
        key=lambda m: m.setting.simplicity(),
    )
    baselines = [m for m in eligible if m.setting.is_baseline]
    if not baselines:
        return None
    choice = baselines[0]
    best = choice.effective_samples_per_s(samples_per_seed)
    for candidate in eligible:
        figure = candidate.effective_samples_per_s(samples_per_seed)
        if figure > best * (1.0 + TIE_TOLERANCE):
            choice, best = candidate, figure
    # Never slower than one eager seed per trial: true by construction (the baselines are the simplest and
    # the figure only rises); checked so that a change to the visiting order cannot break it unseen.
    fastest_baseline = max(baselines, key=lambda m: m.effective_samples_per_s(samples_per_seed))
    if best < fastest_baseline.effective_samples_per_s(samples_per_seed) and not choice.setting.is_baseline:
        return fastest_baseline.setting
    return choice.setting


def _tuning_keeps_pace(
    candidate: Measurement, measured: Sequence[Measurement], samples_per_seed: float
) -> bool:
    """Whether the one-seed trials of `candidate`'s compile mode and trials per GPU are at least as fast as
    eager ones (always, for an eager candidate)."""
    setting = candidate.setting
    if setting.compile_mode == "none":
        return True
    figures = {m.setting: m.effective_samples_per_s(samples_per_seed) for m in measured}
    compiled = figures.get(Setting(1, setting.compile_mode, setting.trials_per_gpu))
    eager = figures.get(Setting(1, "none", setting.trials_per_gpu))
    return compiled is not None and eager is not None and compiled >= eager


@dataclass(frozen=True)
class ThroughputChoice:
    """A study's measured choice, everything it was chosen from, and where the figures come from."""

    setting: Setting
    measurements: tuple[Measurement, ...]
    samples_per_seed: float  # what one seed trains over the study's epochs: the overhead's amortisation
    gpu: str  # torch.cuda.get_device_name of the GPU measured
    source: str  # "measured", "cached" (an earlier study of the same shape), "kept" (a restarted driver)
    measured_at: str = ""  # ISO time of the measurement
    probed_method: str = ""  # the method whose trial was measured
    key: Mapping[str, Any] = field(default_factory=dict)  # the cache key (the study's shape)

    def figure(self, measurement: Measurement) -> float:
        return measurement.effective_samples_per_s(self.samples_per_seed)

    @property
    def chosen(self) -> Measurement:
        return next(m for m in self.measurements if m.setting == self.setting)

    @property
    def baseline(self) -> Measurement | None:
        """The fastest measured one-eager-seed-per-trial candidate, the reference of every ratio."""
        baselines = [m for m in self.measurements if m.setting.is_baseline and m.measured]
        return max(baselines, key=self.figure, default=None)

    def speedup(self, measurement: Measurement) -> float | None:
        """`measurement`'s effective samples/s over the baseline's (None without one)."""
        baseline = self.baseline
        if baseline is None or not measurement.measured:
            return None
        return self.figure(measurement) / self.figure(baseline)

    def describe(self) -> str:
        chosen = self.chosen
        ratio = self.speedup(chosen)
        how = {"measured": "measured", "cached": "measured by an earlier study of the same shape"}.get(
            self.source, "chosen when the study started"
        )
        return (
            f"{self.setting.label()}: {self.figure(chosen):,.0f} samples/s per GPU"
            + (f", {ratio:.1f}x one eager seed per trial" if ratio is not None else "")
            + f" ({how} on {self.gpu or 'the GPU'})"
        )

    def rows(self) -> list[dict[str, Any]]:
        """One row per candidate, simplest first: what the driver log, the artifact and the page show."""
        rows = []
        for m in sorted(self.measurements, key=lambda m: m.setting.simplicity()):
            ratio = self.speedup(m)
            rows.append(
                {
                    **m.to_dict(),
                    "effective_samples_per_s": round(self.figure(m), 1) if m.measured else None,
                    "x_baseline": None if ratio is None else round(ratio, 3),
                    "chosen": m.setting == self.setting,
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.setting.to_dict(),
            "summary": self.describe(),
            "source": self.source,
            "gpu": self.gpu,
            "measured_at": self.measured_at,
            "probed_method": self.probed_method,
            "samples_per_seed": self.samples_per_seed,
            "rule": (
                f"fastest samples/s per GPU with each trial's build and warm-up (compile) amortised over the "
                f"samples it trains; a tie (within {TIE_TOLERANCE:.0%}) goes to the simpler setting; never "
                "slower than one eager seed per trial"
            ),
            "candidates": self.rows(),
            "key": dict(self.key),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ThroughputChoice:
        return cls(
            setting=Setting.from_dict(data["chosen"]),
            measurements=tuple(Measurement.from_dict(row) for row in data.get("candidates") or ()),
            samples_per_seed=float(data.get("samples_per_seed") or 0.0),
            gpu=str(data.get("gpu") or ""),
            source=str(data.get("source") or "kept"),
            measured_at=str(data.get("measured_at") or ""),
            probed_method=str(data.get("probed_method") or ""),
            key=dict(data.get("key") or {}),
        )


@dataclass(frozen=True)
class CachedProbe:
    """An earlier study's measurement of the same shape."""

    measurements: tuple[Measurement, ...]
    gpu: str
    measured_at: str
    probed_method: str
    complete: bool  # every candidate was measured (none was cut by the time bound)
    attempts: int  # how many studies measured this shape
    samples_per_seed_epoch: int  # what one seed trains per epoch (the overhead's amortisation)

    @property
    def usable(self) -> bool:
        """Whether a study may skip measuring: the measurement was complete, or was retried already."""
        return self.complete or self.attempts >= MAX_PROBE_ATTEMPTS


def cache_key_id(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]


class ThroughputCache:
    """Measurements by study shape in one JSON file under the data dir, shared by the drivers of a stack.

    Entries are keyed by the shape that decides a step's speed (workers.driver.throughput.probe_key: model
    preset and overrides, dataset, batch size, the method set and the measured trial, the candidates, the
    GPU kind and torch's version). Writes hold an exclusive lock and replace the file whole, so two drivers
    starting at once neither lose an entry nor read half a file; an unreadable file is an empty cache.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def get(self, key: Mapping[str, Any]) -> CachedProbe | None:
        entry = self._entries().get(cache_key_id(key))
        if entry is None or entry.get("key") != json.loads(json.dumps(key, default=str)):
            return None
        return CachedProbe(
            measurements=tuple(Measurement.from_dict(m) for m in entry.get("measurements") or ()),
            gpu=str(entry.get("gpu") or ""),
            measured_at=str(entry.get("measured_at") or ""),
            probed_method=str(entry.get("probed_method") or ""),
            complete=bool(entry.get("complete")),
            attempts=int(entry.get("attempts") or 1),
            samples_per_seed_epoch=int(entry.get("samples_per_seed_epoch") or 0),
        )

    def put(
        self,
        key: Mapping[str, Any],
        measurements: Sequence[Measurement],
        *,
        gpu: str,
        probed_method: str,
        complete: bool,
        samples_per_seed_epoch: int,
        measured_at: str | None = None,
    ) -> CachedProbe:
        """Store a measurement of `key` (replacing an earlier one, whose attempts it counts on)."""
        key_id = cache_key_id(key)
        with self._locked():
            entries = self._entries()
            attempts = int((entries.get(key_id) or {}).get("attempts") or 0) + 1
            entries[key_id] = {
                "key": json.loads(json.dumps(key, default=str)),
                "gpu": gpu,
                "probed_method": probed_method,
                "measured_at": measured_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "complete": complete,
                "attempts": attempts,
                "samples_per_seed_epoch": samples_per_seed_epoch,
                "measurements": [m.to_dict() for m in measurements],
            }
            self._write(entries)
        cached = self.get(key)
        assert cached is not None
        return cached

    def _entries(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != _CACHE_FORMAT:
            return {}
        entries = data.get("entries")
        return dict(entries) if isinstance(entries, dict) else {}

    def _write(self, entries: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"format": _CACHE_FORMAT, "entries": entries}, indent=1, sort_keys=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text + "\n")
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


# ----- the measuring schedule: candidates on n probe trial processes sharing one GPU --------------------
#
# For each (k seeds, compile) of `probe_order`, while the bound lasts: every process builds the probe trial
# with k seeds and warms it up (compiles: concurrently, as n trials starting together would), then all n
# step one common window (n trials per GPU, their samples/s summed) and process 0 one alone (1 trial per
# GPU). A candidate the bound cuts, or that fails (out of memory with n on the GPU), is kept unmeasured with
# why; a setting that fails n times over is tried alone.

WINDOW_S = 2.0  # seconds of steady steps per window
WARMUP_STEPS = 5  # enough for torch.compile's first call and CUDA graphs' warm-up, record and first replay


@dataclass(frozen=True)
class Prepared:
    """One probe process's candidate, built and warmed up (or why not)."""

    ok: bool
    build_s: float = 0.0
    warmup_s: float = 0.0
    warmup_steps: int = 0
    samples_per_seed_epoch: int = 0
    error: str = ""


@dataclass(frozen=True)
class Stepped:
    """One probe process's window: every seed's samples, its seconds and steps."""

    samples: int
    seconds: float
    steps: int


class ProbePool(Protocol):
    """n probe trial processes on one GPU (workers.driver.throughput.RayProbePool; the tests give a fake)."""

    @property
    def size(self) -> int: ...

    @property
    def same_gpu(self) -> bool:
        """Whether all n share one GPU (else their common window measures no packing)."""
        ...

    def prepare(self, config: Mapping[str, Any], count: int, timeout_s: float) -> list[Prepared]:
        """The first `count` processes build `config`'s trial and warm it up; TimeoutError past timeout_s."""
        ...

    def window(self, count: int, seconds: float, timeout_s: float) -> list[Stepped]:
        """The first `count` processes step one common window of `seconds`."""
        ...

    def release(self) -> None:
        """Every process drops its trial (and its memory)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Measured:
    measurements: tuple[Measurement, ...]
    complete: bool  # no candidate was cut by the bound
    samples_per_seed_epoch: int


def measure_settings(
    pool: ProbePool,
    config_for: Callable[[int, str], Mapping[str, Any]],
    *,
    num_seeds: int,
    trials_per_gpu: Sequence[int],
    budget_s: float = PROBE_BUDGET_S,
    window_s: float = WINDOW_S,
    clock: Callable[[], float] = time.monotonic,
) -> Measured:
    """Every candidate of `probe_order(num_seeds)` x `trials_per_gpu` (at most two values: 1 and the
    pool's size), measured on `pool` until `budget_s` has passed (the schedule above); `config_for(k,
    compile)` is the probe trial's config with k seeds under that compile mode."""
    deadline = clock() + budget_s
    packed = max(trials_per_gpu)
    alone = 1 in trials_per_gpu
    measurements: list[Measurement] = []
    samples_per_seed_epoch = 0
    cut = False

    def unmeasured(k: int, compile_mode: str, note: str) -> None:
        for n in sorted(set(trials_per_gpu)):
            measurements.append(Measurement(Setting(k, compile_mode, n), None, note=note))

    for k, compile_mode in probe_order(num_seeds):
        if cut or clock() >= deadline:
            cut = True
            unmeasured(k, compile_mode, f"not measured: the {budget_s:g} s bound ran out")
            continue
        config = config_for(k, compile_mode)
        try:
            prepared = pool.prepare(config, packed, deadline - clock())
            if packed > 1:
                measured = _packed(pool, prepared, Setting(k, compile_mode, packed), window_s)
                if alone and not all(p.ok for p in prepared):
                    pool.release()  # n did not fit (or failed): does one alone?
                    prepared = pool.prepare(config, 1, deadline - clock())
            if alone:
                if prepared[0].ok:
                    measured_alone = _alone(pool, prepared[0], Setting(k, compile_mode, 1), window_s)
                else:
                    measured_alone = Measurement(
                        Setting(k, compile_mode, 1), None, note=f"failed: {prepared[0].error}"
                    )
                measurements.append(measured_alone)
            if packed > 1:
                measurements.append(measured)
            samples_per_seed_epoch = samples_per_seed_epoch or next(
                (p.samples_per_seed_epoch for p in prepared if p.ok), 0
            )
        except TimeoutError:
            cut = True  # the processes may still be compiling: the pool is closed, not reused
            unmeasured(k, compile_mode, f"not measured: the {budget_s:g} s bound ran out while it warmed up")
        finally:
            if not cut:
                pool.release()
    return Measured(tuple(measurements), complete=not cut, samples_per_seed_epoch=samples_per_seed_epoch)


# A window that has begun is finished: the bound is checked between windows, not inside one.
_WINDOW_TIMEOUT_S = 120.0


def _alone(pool: ProbePool, prepared: Prepared, setting: Setting, window_s: float) -> Measurement:
    """Process 0 steps a window while the others idle: one trial per GPU."""
    (stepped,) = pool.window(1, window_s, window_s + _WINDOW_TIMEOUT_S)
    return Measurement(setting, stepped.samples / stepped.seconds, _overhead(prepared, _step_s(stepped)))


def _packed(pool: ProbePool, prepared: Sequence[Prepared], setting: Setting, window_s: float) -> Measurement:
    """All n processes step one common window: n trials per GPU, their samples/s summed."""
    n = setting.trials_per_gpu
    failed = next((p for p in prepared if not p.ok), None)
    if failed is not None:
        return Measurement(setting, None, note=f"failed with {n} trials on one GPU: {failed.error}")
    if not pool.same_gpu:
        return Measurement(setting, None, note=f"not measured: the {n} probe trials got different GPUs")
    stepped = pool.window(n, window_s, window_s + _WINDOW_TIMEOUT_S)
    rate = sum(s.samples / s.seconds for s in stepped if s.seconds > 0)
    overheads = [_overhead(p, _step_s(s)) for p, s in zip(prepared, stepped, strict=True)]
    return Measurement(setting, rate, sum(overheads) / len(overheads))


def _step_s(stepped: Stepped) -> float:
    return stepped.seconds / max(stepped.steps, 1)


def _overhead(prepared: Prepared, step_s: float) -> float:
    """What one trial paid before its steady steps: building it, and its warm-up (compile, CUDA-graph
    capture) beyond what as many steady steps take."""
    return max(0.0, prepared.build_s + prepared.warmup_s - prepared.warmup_steps * step_s)
