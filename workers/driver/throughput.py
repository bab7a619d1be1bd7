"""The start-of-study measurement that picks a GPU study's seeds per trial, compile mode and trials per GPU.

Runs only where the spec leaves the choice open (`measures_settings`: `resources.seeds_per_trial` "auto",
`budget.compile` not written by the submitter, every method stackable) and the trials get a GPU
(workers.trials.plan.plan_trials calls it then, after the memory probe). It:

1. asks a GPU node for its kind (torch.cuda.get_device_name) and torch's version, and looks the study's
   shape up in the cache under the data dir (workers.trials.throughput.ThroughputCache); a usable entry
   is the measurement, and nothing runs;
2. otherwise starts n probe trial processes on one GPU (Ray actors of 1/n GPU each, n the largest trials
   per GPU the plan may choose), which import torch and load the dataset (bounded by START_TIMEOUT_S);
3. measures the candidates on them while PROBE_BUDGET_S lasts (workers.trials.throughput.measure_settings):
   for each (k seeds, compile), every process builds the study's probe trial (its first method at its
   widest, as the memory probe runs it) with k seeds and warms it up (compiles), then all n step one
   common window together (n trials per GPU) and process 0 one alone (1 trial per GPU); a candidate the
   bound cuts, or that fails (out of memory with n trials on the GPU), is recorded unmeasured, with why;
4. decides (workers.trials.throughput.decide), caches, and logs every candidate and the choice.

n is capped by the CPUs of the largest GPU node (trials that wait for CPUs do not run together).

The driver process never imports torch: the probe processes do (workers.trials.throughput_probe).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray

from studies.spec import StudySpec
from studies.trial_config import Key, seed_fields
from workers.driver.trial_configs import StudyTrialConfigs
from workers.trials.throughput import (
    PROBE_BUDGET_S,
    Measured,
    Prepared,
    Setting,
    Stepped,
    ThroughputCache,
    ThroughputChoice,
    decide,
    measure_settings,
    probe_order,
    seed_candidates,
)

__all__ = [
    "COMPILE_FIELD",
    "START_TIMEOUT_S",
    "ProbeWorker",
    "RayProbePool",
    "choose_by_throughput",
    "measures_settings",
    "probe_key",
]

log = logging.getLogger(__name__)

COMPILE_FIELD = "budget.compile"  # as studies.store records the fields a submitter wrote
START_TIMEOUT_S = 300.0  # the probe processes' start: imports, the dataset (a first download included)
_WINDOW_LEAD_S = 0.5  # a common window starts this long after it is asked for, so every process is there


def measures_settings(spec: StudySpec, fields_set: frozenset[str] | None) -> bool:
    """Whether the study's seeds per trial and compile mode are left to the measurement: seeds_per_trial
    "auto", budget.compile not written (`fields_set`: the spec fields its submitter wrote, None when not
    recorded: a study stored before they were, which keeps the rule it was submitted under), and every
    method stackable (a plugin layer torch.func cannot stack trains one seed per trial)."""
    if fields_set is None or COMPILE_FIELD in fields_set:
        return False
    return spec.resources.seeds_per_trial == "auto" and not spec.unstackable_methods()


# ----- the probe processes ---------------------------------------------------------------------------


class ProbeWorker:
    """A probe trial process as a Ray actor on a GPU node (workers.trials.throughput_probe.ProbeProcess,
    imported there: the driver process never imports torch), and where it runs."""

    def __init__(self, base_config: Mapping[str, Any], device: str = "cuda") -> None:
        from workers.trials.throughput_probe import ProbeProcess

        self.process = ProbeProcess(base_config, device)

    def where(self) -> dict[str, Any]:
        import torch

        return {
            "node": ray.get_runtime_context().get_node_id(),
            "gpu": [str(g) for g in ray.get_gpu_ids()],
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "torch": torch.__version__,
        }

    def prepare(self, config: Mapping[str, Any]) -> Prepared:
        return self.process.prepare(config)

    def window(self, start_at: float, seconds: float) -> Stepped:
        return self.process.window(start_at, seconds)

    def release(self) -> None:
        self.process.release()


class RayProbePool:
    """`size` ProbeWorker actors of `gpu_share` GPU each, started and placed before the bound starts."""

    def __init__(
        self,
        size: int,
        *,
        cpu: float,
        gpu_share: float,
        base_config: Mapping[str, Any],
        start_timeout_s: float,
        device: str = "cuda",  # "cpu": the same processes without a GPU (a smoke run of this code)
    ) -> None:
        worker = ray.remote(ProbeWorker).options(num_gpus=gpu_share if device == "cuda" else 0, num_cpus=cpu)
        self.actors: list[Any] = [worker.remote(dict(base_config), device) for _ in range(size)]
        try:
            self.places = ray.get([a.where.remote() for a in self.actors], timeout=start_timeout_s)
        except BaseException:
            self.close()
            raise

    @property
    def size(self) -> int:
        return len(self.actors)

    @property
    def same_gpu(self) -> bool:
        return len({(p["node"], tuple(p["gpu"])) for p in self.places}) == 1

    @property
    def device(self) -> str:
        return str(self.places[0]["device"])

    def prepare(self, config: Mapping[str, Any], count: int, timeout_s: float) -> list[Prepared]:
        refs = [a.prepare.remote(dict(config)) for a in self.actors[:count]]
        return ray.get(refs, timeout=max(timeout_s, 0.001))

    def window(self, count: int, seconds: float, timeout_s: float) -> list[Stepped]:
        start_at = time.time() + _WINDOW_LEAD_S
        refs = [a.window.remote(start_at, seconds) for a in self.actors[:count]]
        return ray.get(refs, timeout=max(timeout_s, 0.001))

    def release(self) -> None:
        ray.get([a.release.remote() for a in self.actors], timeout=START_TIMEOUT_S)

    def close(self) -> None:
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception as exc:  # already gone: nothing to give back
                log.debug("probe actor already gone: %s", exc)


def _cpu_slots(cpu: float) -> int:
    """How many trials of `cpu` CPUs the largest GPU node runs at once (at least one)."""
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    # 0.3 / 0.1 is 2.999...: three fit
    return max([math.floor(r.get("CPU", 0.0) / cpu + 1e-9) for r in nodes if r.get("GPU", 0.0) > 0] + [1])


def gpu_kind() -> tuple[str, str]:
    """Runs on a GPU node (a Ray task): (torch.cuda.get_device_name, torch's version)."""
    import torch

    return torch.cuda.get_device_name(), torch.__version__


# ----- the study's choice ------------------------------------------------------------------------------


def probe_key(
    spec: StudySpec, probe: Mapping[str, Any], *, gpu: str, torch_version: str, trials_per_gpu: Sequence[int]
) -> dict[str, Any]:
    """The shape that decides a step's speed, which the cache files a measurement under: the model (preset
    and overrides), the dataset and batch size, the method set and the probed trial (method and knobs), the
    candidates (seeds per trial, trials per GPU), the GPU kind, torch's version and NormLab's revision (the
    training step's code: a change to it is measured again)."""
    from studies.provenance import git_revision

    return {
        "dataset": spec.dataset,
        "model": spec.model.preset,
        "model_overrides": dict(spec.model.overrides),
        "batch_size": spec.budget.batch_size,
        "methods": sorted(spec.methods),
        "probed_method": probe.get(Key.METHOD),
        "probed_knobs": dict(probe.get(Key.KNOBS) or {}),
        "seeds_per_trial": seed_candidates(len(spec.seeds)),
        "trials_per_gpu": sorted(set(trials_per_gpu)),
        "gpu": gpu,
        "torch": torch_version,
        "normlab_revision": git_revision(),
    }


def choose_by_throughput(
    spec: StudySpec,
    base: Mapping[str, Any],
    *,
    trials_per_gpu: Sequence[int],
    gpu_share: float,
    cache: ThroughputCache,
    start_pool: Callable[..., Any] = RayProbePool,
    budget_s: float = PROBE_BUDGET_S,
) -> ThroughputChoice | None:
    """The measured setting of a GPU study (module docstring), or None when it could not be measured (the
    plan then keeps the spec-time rule). `trials_per_gpu`: the candidates' trials per GPU (1 and what the
    memory rule packs, or the spec's own share); `gpu_share`: what each probe process asks of a GPU."""
    configs = StudyTrialConfigs(spec)
    probe = configs.probes(1)[0]  # the first method at its widest
    # No more trials per GPU than a GPU node has CPUs for (the trials would queue for them, not run).
    slots = _cpu_slots(spec.resources.cpu)
    trials_per_gpu = sorted({min(n, slots) for n in trials_per_gpu})
    probe_share = min(gpu_share, math.floor(10_000 / max(trials_per_gpu)) / 10_000)
    try:
        task = ray.remote(num_gpus=probe_share, num_cpus=spec.resources.cpu)(gpu_kind)
        gpu, torch_version = ray.get(task.remote(), timeout=START_TIMEOUT_S)
    except Exception as exc:
        log.warning(
            "could not reach a GPU node to measure the study's settings (%s); keeping the default", exc
        )
        return None
    key = probe_key(spec, probe, gpu=gpu, torch_version=torch_version, trials_per_gpu=trials_per_gpu)
    cached = cache.get(key)
    if cached is not None and cached.usable:
        log.info(
            "throughput of this study's shape on %s measured at %s: not measured again",
            gpu,
            cached.measured_at,
        )
        measurements, source, measured_at = cached.measurements, "cached", cached.measured_at
        samples_per_seed_epoch, probed = cached.samples_per_seed_epoch, cached.probed_method
    else:
        measured = _measure(spec, base, probe, key, trials_per_gpu, probe_share, start_pool, budget_s)
        if measured is None:
            return None
        stored = cache.put(
            key,
            measured.measurements,
            gpu=gpu,
            probed_method=str(probe.get(Key.METHOD)),
            complete=measured.complete,
            samples_per_seed_epoch=measured.samples_per_seed_epoch,
        )
        measurements, source, measured_at = stored.measurements, "measured", stored.measured_at
        samples_per_seed_epoch, probed = measured.samples_per_seed_epoch, str(probe.get(Key.METHOD))
    samples_per_seed = float(samples_per_seed_epoch * spec.budget.epochs)
    tuning = spec.kind == "compare" and bool(configs.tuned_methods)  # one-seed trials under the same mode
    setting = decide(measurements, samples_per_seed=samples_per_seed, tuning_trials=tuning)
    if setting is None:
        log.warning("one eager seed per trial could not be measured on %s; keeping the default", gpu)
        return None
    choice = ThroughputChoice(
        setting=setting,
        measurements=tuple(measurements),
        samples_per_seed=samples_per_seed,
        gpu=gpu,
        source=source,
        measured_at=measured_at,
        probed_method=probed,
        key=key,
    )
    for row in choice.rows():
        log.info("throughput candidate: %s", _row_text(row))
    log.info("throughput choice: %s", choice.describe())
    return choice


def _measure(
    spec: StudySpec,
    base: Mapping[str, Any],
    probe: Mapping[str, Any],
    key: Mapping[str, Any],
    trials_per_gpu: Sequence[int],
    probe_share: float,
    start_pool: Callable[..., Any],
    budget_s: float,
) -> Measured | None:
    packed = max(trials_per_gpu)
    log.info(
        "measuring %d candidate setting(s) of %s on %s (%d probe trial(s) on one GPU, at most %g s)",
        len(probe_order(len(spec.seeds))) * len(set(trials_per_gpu)),
        probe.get(Key.METHOD),
        key["gpu"],
        packed,
        budget_s,
    )
    base_config = {**base, **probe}
    try:
        pool = start_pool(
            packed, cpu=spec.resources.cpu, gpu_share=probe_share, base_config=base_config,
            start_timeout_s=START_TIMEOUT_S,
        )  # fmt: skip
    except Exception as exc:
        log.warning("could not start the throughput probe (%s); keeping the default", exc)
        return None

    def config_for(k: int, compile_mode: str) -> dict[str, Any]:
        """The probe trial with k of the study's seeds, under `compile_mode`."""
        config = {k_: v for k_, v in base_config.items() if k_ != Key.SEEDS}
        seeds = list(spec.seeds[:k])
        return {**config, **seed_fields(seeds), Key.COMPILE: compile_mode}

    try:
        return measure_settings(
            pool, config_for, num_seeds=len(spec.seeds), trials_per_gpu=trials_per_gpu, budget_s=budget_s
        )
    except Exception as exc:
        log.warning("the throughput probe failed (%s); keeping the default", exc)
        return None
    finally:
        pool.close()


def _row_text(row: Mapping[str, Any]) -> str:
    setting = Setting.from_dict(row)
    if row.get("samples_per_s") is None:
        return f"{setting.label()}: {row.get('note') or 'not measured'}"
    ratio = row.get("x_baseline")
    return (
        f"{setting.label()}: {row['samples_per_s']:,.0f} samples/s per GPU, "
        f"{row.get('overhead_s') or 0:.1f} s to build and warm up each trial, "
        f"{row.get('effective_samples_per_s') or 0:,.0f} amortised"
        + (f" ({ratio:.2f}x one eager seed per trial)" if ratio is not None else "")
        + (" <- chosen" if row.get("chosen") else "")
    )
