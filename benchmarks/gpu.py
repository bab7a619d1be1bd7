"""GPU throughput of NormLab trials, side by side in one run: the GPU table of BENCHMARKS.md.

    python3 benchmarks/gpu.py [--out FILE]      # on a CUDA machine, about 4 minutes
    python3 benchmarks/gpu.py --smoke           # tiny sizes on CPU: checks the script end to end

Made for a GPU machine that has torch but not the service's dependencies (Ray, MLflow, pydantic): it
imports models/, workers/training (torch-only) and benchmarks/gpu_seed_batch.py; the tests run it with
those three packages made unimportable. No dataset can be downloaded there, so every trial trains on SYNTHETIC CIFAR-sized data (random 3x32x32 images, 10 classes)
placed as the training loop places its split (copied to the GPU once, `workers.training.batches
.device_resident`); the figures measure speed only.

One training step is the loop's step (workers/training/loop.py): the batch gather (on the GPU),
the preset's crop+flip augmentation on the device, bf16 autocast forward (optionally torch.compile'd, as
`budget.compile` does), AutoNorm's per-step gate entropy, label-smoothed cross-entropy, backward, gradient
clipping at 1.0, AdamW with the loop's parameter groups, the warmup-cosine scheduler. Not included: the
per-epoch evaluation and checkpoint. AutoNorm-S is measured before its freeze (selectors still training: the
slower phase). Its compiled rows compile the forward and backward only and run clipping, the gate entropy
and AdamW eagerly: budget.compile's path before the whole step was compiled. benchmarks/gpu_whole_step.py
times the loop's compiled step as it is now (workers.training.whole_step) against this one.

Rows, each for FrozenLN and AutoNorm-S as samples/s and as a ratio to one eager trial of the same method:
one trial eager, compiled (mode default) and with CUDA graphs (mode reduce-overhead); N concurrent trial
processes (eager and CUDA graphs); k seeds batched into one trial (benchmarks/gpu_seed_batch.py), eager
and, for the largest k, compiled with CUDA graphs. Then
step-time ratios AutoNorm-S / FrozenLN, the AutoNorm layer's forward+backward against nn.LayerNorm, and
whether the AutoNorm model compiles as one graph. Sections run in priority order under a time budget;
a section that no longer fits is reported as skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import json
import os
import platform
import select
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file (`python3 benchmarks/gpu.py`), not as a module
    sys.path.insert(0, str(REPO_ROOT))

METHODS = ("frozen_ln", "autonorm_s")
METHOD_NAMES = {"frozen_ln": "FrozenLN", "autonorm_s": "AutoNorm-S"}
SERVICE_PACKAGES = ("pydantic", "ray", "mlflow")  # absent on the GPU machine; --block-imports emulates it


@dataclass(frozen=True)
class Sizes:
    """Everything that differs between the real run and the CPU smoke run."""

    preset: str
    model_fields: dict[str, Any]
    batch: int
    dataset_size: int
    warmup_steps: int
    measure_s: float
    concurrency: tuple[int, ...]
    seeds_per_trial: tuple[int, ...]
    seed_batch_steps: int  # timed steps of one seed-batched measurement (k * batch samples each)
    packed_seeds: int  # seeds per trial of the packed measurement (0: skip it)
    layer_shape: tuple[int, int, int]  # (B, T, D) for the norm layer benchmark
    layer_iters: int
    budget_s: float
    compile_backend: str  # "inductor" on the GPU; "eager" (dynamo only) in the smoke run
    skipped: tuple[str, ...] = ()  # sections left out of this run (--skip), named in the table


# Sections a run may leave out (--skip) when an earlier run measured them and device time is short.
SKIPPABLE = ("concurrent", "packed", "layer", "seed_batch", "default")  # seed_batch: the eager k-seed rows


FULL = Sizes(
    preset="vit_lite_paper",
    model_fields={"image_size": 32, "in_channels": 3, "num_classes": 10},
    batch=128,
    dataset_size=8192,
    warmup_steps=10,
    measure_s=3.0,
    concurrency=(4, 8),
    seeds_per_trial=(8, 32),
    seed_batch_steps=20,
    packed_seeds=8,
    layer_shape=(128, 65, 128),
    layer_iters=200,
    budget_s=280.0,
    compile_backend="inductor",
)
SMOKE = Sizes(
    preset="vit_lite_tiny",
    model_fields={"image_size": 8, "in_channels": 3, "num_classes": 10},
    batch=16,
    dataset_size=64,
    warmup_steps=2,
    measure_s=0.2,
    concurrency=(2,),
    seeds_per_trial=(2,),
    seed_batch_steps=2,
    packed_seeds=2,
    layer_shape=(4, 17, 32),
    layer_iters=3,
    budget_s=120.0,
    compile_backend="eager",
)


# ----- imports that avoid the service's dependencies ----------------------------------------------------


class _BlockImports(importlib.abc.MetaPathFinder):
    """Makes the named top-level packages unimportable, as on a machine where they are not installed."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked by --block-imports)")
        return None


# ----- one trial's training step ------------------------------------------------------------------------


class TrialStep:
    """One trial's model, optimizer and synthetic data; calling it runs one training step of the loop."""

    # The phases of a step, as torch.profiler ranges when `phases` is on (benchmarks/gpu_step_profile.py).
    PHASES = ("batch", "forward", "gate_entropy", "loss", "backward", "clip", "optimizer")

    def __init__(
        self, method: str, mode: str, sizes: Sizes, device: Any, *, seed: int = 0, phases: bool = False
    ) -> None:
        import torch

        from models import build_model
        from models.norms import gated_norms
        from studies.methods import norm_for_method
        from workers.training import augment, batches, compiled, metrics, optim, schedule

        torch.manual_seed(seed)
        self.device, self.batch = device, sizes.batch
        fields = {"norm": norm_for_method(method).kind, **sizes.model_fields}
        self.model = build_model(sizes.preset, fields).to(device).train()
        backend = sizes.compile_backend
        self.forward = compiled.CompiledForward(self.model, mode, device, backend=backend)
        if mode != "none" and not self.forward.active:
            raise RuntimeError(f"compile mode {mode} fell back to eager on {device}")
        self.optimizer = optim.build_optimizer(self.model, lr=5e-4, weight_decay=3e-2)
        self.scheduler = schedule.build_warmup_cosine(self.optimizer, warmup_steps=100, total_steps=10**6)
        self.loss_fn = metrics.TaskLoss("image_classification", label_smoothing=0.1)
        self.gates = metrics.TrainGateEntropy([norm for _, norm in gated_norms(self.model)])
        side, channels = sizes.model_fields["image_size"], sizes.model_fields["in_channels"]
        generator = torch.Generator().manual_seed(seed)
        images = torch.randn(sizes.dataset_size, channels, side, side, generator=generator)  # SYNTHETIC
        labels = torch.randint(
            0, sizes.model_fields["num_classes"], (sizes.dataset_size,), generator=generator
        )
        # Where the loop gathers from: the split copied to the GPU once (workers.training.batches).
        self.dataset = batches.device_resident(torch.utils.data.TensorDataset(images, labels), device)
        # What the loop builds for CIFAR-10 on vit_lite_paper (its default policy, also in the smoke run).
        self.augmenter = augment.ImageAugmenter(
            augment.default_augment("vit_lite_paper"), image_size=side, mirror_symmetric=True,
            mean=[0.0] * channels, std=[1.0] * channels, seed=seed,
        )  # fmt: skip
        self._iterate_batches = batches.iterate_batches
        self._generator = generator
        self._batches: Iterator[tuple[Any, Any]] = iter(())
        self.loss_sum = torch.zeros((), device=device)
        self.amp = device.type == "cuda"
        self.phases = phases

    def _phase(self, name: str) -> contextlib.AbstractContextManager[Any]:
        """A profiler range named step/<name> when phases are on; nothing otherwise (the timed runs)."""
        import torch

        return torch.profiler.record_function(f"step/{name}") if self.phases else contextlib.nullcontext()

    def _next_batch(self) -> tuple[Any, Any]:
        import torch

        for x, y in self._batches:
            if x.shape[0] == self.batch:  # full batches only: one static shape per compiled graph
                return x, y
        order = torch.randperm(len(self.dataset), generator=self._generator)
        order = order.to(self.dataset.tensors[0].device)  # as the loop: one copy an epoch
        self._batches = self._iterate_batches(self.dataset, self.batch, order=order)
        return next(self._batches)

    def __call__(self) -> None:
        import torch
        from torch import nn

        with self._phase("batch"):
            x, y = self._next_batch()
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            x = self.augmenter(x)
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if self.amp else contextlib.nullcontext()
        with self._phase("forward"), autocast:
            output = self.forward(x)
        with self._phase("gate_entropy"):
            self.gates.update()
        with self._phase("loss"):
            loss = self.loss_fn(output, y)
        with self._phase("backward"):
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with self._phase("clip"):
            nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        with self._phase("optimizer"):
            self.optimizer.step()
            self.scheduler.step()
            self.loss_sum += loss.detach() * x.shape[0]


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_steps(step: Callable[[], None], device: Any, seconds: float) -> tuple[int, float]:
    """Steps run in about `seconds` of wall time and the time they took, GPU work included."""
    _synchronize(device)
    started = time.perf_counter()
    steps = 0
    while time.perf_counter() - started < seconds:
        step()
        steps += 1
    _synchronize(device)
    return steps, time.perf_counter() - started


def warm_up(step: Callable[[], None], device: Any, steps: int) -> float:
    """Run `steps` steps (compilation and CUDA-graph recording happen here); returns the seconds taken."""
    started = time.perf_counter()
    for _ in range(steps):
        step()
    _synchronize(device)
    return time.perf_counter() - started


# ----- concurrent trial processes -----------------------------------------------------------------------


def worker_main(config: dict[str, Any]) -> None:
    """A trial process: builds every (method, mode) step, warms them, then runs timed windows on request.

    Protocol on stdin/stdout, one JSON object per line: it prints {"ready": ...} once warm; each request
    {"method", "mode", "start_at" (time.time()), "seconds"} is answered by {"steps", "elapsed"}.
    """
    import torch

    sizes = Sizes(**{**config["sizes"], "concurrency": (), "seeds_per_trial": (), "layer_shape": (1, 1, 1)})
    device = torch.device(config["device"])
    steps: dict[tuple[str, str], TrialStep] = {}
    for method in METHODS:
        for mode in config["modes"]:
            steps[method, mode] = TrialStep(method, mode, sizes, device, seed=config["seed"])
            warm_up(steps[method, mode], device, sizes.warmup_steps)
    print(json.dumps({"ready": config["seed"]}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("stop"):
            break
        step = steps[request["method"], request["mode"]]
        if request.get("warm"):
            # Right before the window: a recompile (another model's graph changed dynamo's cache) or a
            # CUDA-graph re-recording happens here, not inside the timed window.
            print(json.dumps({"warm_s": warm_up(step, device, 3)}), flush=True)
            continue
        time.sleep(max(0.0, request["start_at"] - time.time()))
        count, elapsed = measure_steps(step, device, request["seconds"])
        print(json.dumps({"steps": count, "elapsed": elapsed}), flush=True)


class WorkerPool:
    """`size` trial processes on one device, started together and driven through timed windows."""

    def __init__(
        self,
        size: int,
        modes: tuple[str, ...],
        sizes: Sizes,
        device: str,
        argv_extra: list[str],
        ready_s: float,
    ) -> None:
        self.processes: list[subprocess.Popen[str]] = []
        # One compile thread each: the parent's compiles filled inductor's cache, and 8 processes with a
        # pool of compile workers each would only crowd the CPUs.
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
        }
        for seed in range(size):
            config = {"sizes": asdict(sizes), "modes": list(modes), "device": device, "seed": seed}
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                *argv_extra,
                "--worker",
                json.dumps(config),
            ]
            self.processes.append(
                subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            )
        deadline = time.monotonic() + ready_s
        try:
            for process in self.processes:
                self._read(process, timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.close()
            raise

    def run(self, count: int, method: str, mode: str, seconds: float) -> float:
        """Aggregate steps/s of `count` processes stepping the same window at the same time."""
        self._ask(count, {"method": method, "mode": mode, "warm": True})
        answers = self._ask(
            count, {"method": method, "mode": mode, "start_at": time.time() + 0.5, "seconds": seconds}
        )
        return sum(answer["steps"] for answer in answers) / max(answer["elapsed"] for answer in answers)

    def _ask(self, count: int, request: dict[str, Any]) -> list[dict[str, Any]]:
        """Send `request` to the first `count` processes at once; their answers, in order."""
        for process in self.processes[:count]:
            assert process.stdin is not None
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        return [self._read(process) for process in self.processes[:count]]

    def close(self) -> None:
        for process in self.processes:
            with contextlib.suppress(OSError, ValueError):
                assert process.stdin is not None
                process.stdin.write(json.dumps({"stop": True}) + "\n")
                process.stdin.close()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    @staticmethod
    def _read(process: subprocess.Popen[str], timeout: float = 120.0) -> dict[str, Any]:
        assert process.stdout is not None
        if not select.select([process.stdout], [], [], timeout)[0]:
            raise TimeoutError(f"trial process {process.pid} did not answer within {timeout:.0f} s")
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"trial process {process.pid} exited with {process.wait()}")
        return json.loads(line)


def packed_seed_batches(
    sizes: Sizes, device: Any, method: str, k: int, log: Callable[[str], None], *, compile: str = "none"
) -> dict:
    """k-seed trial processes on one GPU, as many as `resources.gpu: auto` would pack: one process is
    started and its peak memory measured, the driver's rule (workers.trials.plan.gpu_share_for)
    turns the peak into trials per GPU, the rest are started, and all step one common timed window.
    With `compile`, each process compiles its step (the first one cold, the others from its caches)."""
    from workers.trials.plan import gpu_share_for

    command = [
        sys.executable, "-m", "benchmarks.gpu_seed_batch", "--serve", "--preset", sizes.preset,
        "--method", method, "--k", str(k), "--device", str(device), "--batch-size", str(sizes.batch),
        "--compile", compile,
    ]  # fmt: skip
    ready_timeout = 120 if compile == "none" else 400
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT
        )

    processes = [start()]
    try:
        first = WorkerPool._read(processes[0], timeout=ready_timeout)
        share = gpu_share_for(first["peak_bytes"], first["device_bytes"])
        count = round(1 / share)
        log(f"{method}: a {k}-seed trial peaks at {first['peak_bytes'] / 2**30:.2f} GiB -> {count} per GPU")
        processes += [start() for _ in range(count - 1)]
        for process in processes[1:]:
            WorkerPool._read(process, timeout=ready_timeout)
        request = json.dumps({"start_at": time.time() + 0.5, "seconds": sizes.measure_s}) + "\n"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(request)
            process.stdin.flush()
        answers = [WorkerPool._read(process, timeout=60) for process in processes]
    finally:
        for process in processes:
            with contextlib.suppress(OSError, ValueError):
                assert process.stdin is not None
                process.stdin.close()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
    steps_per_s = sum(a["steps"] for a in answers) / max(a["elapsed"] for a in answers)
    rate = steps_per_s * k * sizes.batch
    log(f"{count} packed {k}-seed trials, compile {compile}, {method}: {rate:.0f} samples/s")
    return {
        "k": k,
        "processes": count,
        "peak_gib": first["peak_bytes"] / 2**30,
        "rate": rate,
        "compile": compile,
    }


# ----- the norm layer and the compiled graph --------------------------------------------------------------


def layer_times(sizes: Sizes, device: Any, compiled: bool) -> dict[str, float]:
    """Mean forward+backward seconds of AutoNorm and nn.LayerNorm on (B, T, D) inputs, bf16 on CUDA."""
    import torch

    from models.norms.autonorm import AutoNorm

    batch, tokens, dim = sizes.layer_shape
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    x = torch.randn(batch, tokens, dim, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn_like(x)
    layers = {"autonorm": AutoNorm(dim).to(device).train(), "layernorm": torch.nn.LayerNorm(dim).to(device)}
    times = {}
    for name, layer in layers.items():
        forward = torch.compile(layer, dynamic=False, backend=sizes.compile_backend) if compiled else layer

        def step(forward: Callable[[Any], Any] = forward) -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
                out = forward(x)
            out.backward(grad)
            x.grad = None

        for _ in range(max(3, sizes.layer_iters // 20)):
            step()
        _synchronize(device)
        started = time.perf_counter()
        for _ in range(sizes.layer_iters):
            step()
        _synchronize(device)
        times[name] = (time.perf_counter() - started) / sizes.layer_iters
    return times


def autonorm_graph_breaks(sizes: Sizes, device: Any) -> str:
    """What torch._dynamo.explain finds in the AutoNorm model's training forward under bf16 autocast."""
    import torch

    from models import build_model

    model = build_model(sizes.preset, {"norm": "autonorm", **sizes.model_fields}).to(device).train()
    side, channels = sizes.model_fields["image_size"], sizes.model_fields["in_channels"]
    x = torch.randn(sizes.batch, channels, side, side, device=device)
    torch._dynamo.reset()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
        explanation = torch._dynamo.explain(model)(x)
    reasons = sorted({str(reason.reason).splitlines()[0][:120] for reason in explanation.break_reasons})
    text = f"{explanation.graph_count} graph(s), {explanation.graph_break_count} graph break(s)"
    return text + (f": {'; '.join(reasons)}" if reasons else "")


# ----- the run --------------------------------------------------------------------------------------------


class Clock:
    """The run's time budget: sections that would not fit are skipped, and say so."""

    def __init__(self, budget_s: float) -> None:
        self.started, self.budget_s = time.perf_counter(), budget_s

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.started)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


def _seed_batch_function() -> tuple[Callable[..., float] | None, str]:
    """benchmarks.gpu_seed_batch.measure_seed_batched, or None and why it cannot run here."""
    try:
        from benchmarks.gpu_seed_batch import measure_seed_batched
    except ImportError as error:
        return None, f"not available in this run ({error})"
    return measure_seed_batched, ""


def run_benchmark(sizes: Sizes, device: Any, argv_extra: list[str], log: Callable[[str], None]) -> dict:
    """Every measurement, as a dict (the markdown table is rendered from it)."""
    import torch

    clock = Clock(sizes.budget_s)
    single: dict[str, dict[str, float]] = {m: {} for m in METHODS}  # method -> mode -> samples/s
    notes: dict[str, str] = {}
    errors: dict[str, str] = {}  # measurement key -> why it failed
    results: dict[str, Any] = {
        "single": single, "concurrent": {}, "seed_batch": {}, "seed_batch_compiled": {}, "notes": notes,
        "errors": errors,
        "graph_breaks": "not measured", "layer": {}, "packed": {},
    }  # fmt: skip

    def trial(method: str, mode: str) -> None:
        with section(f"single/{mode}/{method}"):
            step = TrialStep(method, mode, sizes, device)
            warm_s = warm_up(step, device, sizes.warmup_steps)
            count, elapsed = measure_steps(step, device, sizes.measure_s)
            single[method][mode] = count * sizes.batch / elapsed
            log(
                f"{method} {mode}: {single[method][mode]:.0f} samples/s (warm-up incl. compile {warm_s:.1f} s)"
            )

    @contextlib.contextmanager
    def section(name: str) -> Iterator[None]:
        """One failing measurement is reported in the table; the others still run."""
        try:
            yield
        except Exception as error:  # the run is one-shot on a lent machine: keep going, say what failed
            traceback.print_exc()
            errors[name] = (
                f"failed: {type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
            )
            log(f"{name} {errors[name]}")

    # 1. One trial: eager, then CUDA graphs (this also fills the compile cache the workers reuse).
    for mode in ("none", "reduce-overhead"):
        for method in METHODS:
            trial(method, mode)
    skips = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
    results["cudagraph_skips"] = skips
    log(f"CUDA graph skips so far: {skips} (0: every reduce-overhead graph replays as a CUDA graph)")
    # 2. Graph breaks of the AutoNorm model (a dynamo trace only: seconds).
    with section("graph_breaks"):
        results["graph_breaks"] = autonorm_graph_breaks(sizes, device)
    log(f"AutoNorm model under torch.compile: {results['graph_breaks']}")
    # 3. N concurrent trial processes.
    if sizes.concurrency and clock.left() > 60 * (device.type == "cuda") + 10:
        with section("concurrent"):
            ready_by = max(10.0, clock.left() - 30)
            pool = WorkerPool(
                max(sizes.concurrency), ("none", "reduce-overhead"), sizes, str(device), argv_extra, ready_by
            )
            log(f"{len(pool.processes)} trial processes ready at {clock.elapsed():.0f} s")
            try:
                for count in sizes.concurrency:
                    for mode in ("none", "reduce-overhead"):
                        for method in METHODS:
                            rate = pool.run(count, method, mode, sizes.measure_s) * sizes.batch
                            results["concurrent"][f"{count}/{mode}/{method}"] = rate
                            log(f"{count} processes {mode} {method}: {rate:.0f} samples/s")
            finally:
                pool.close()
    else:
        notes["concurrent"] = "skipped: the time budget ran out"
    # 4. k seeds in one trial.
    seed_batch, why_not = _seed_batch_function()
    if seed_batch is None:
        notes["seed_batch"] = why_not
    eager_ks = sizes.seeds_per_trial if seed_batch is not None and "seed_batch" not in sizes.skipped else ()
    for k in eager_ks:
        for method in METHODS:
            if clock.left() < 20:
                notes["seed_batch"] = "partly skipped: the time budget ran out"
                break
            with section(f"seed_batch/{k}/{method}"):
                results["seed_batch"][f"{k}/{method}"] = seed_batch(
                    preset=sizes.preset, method=method, k=k, steps=sizes.seed_batch_steps, device=str(device),
                    batch_size=sizes.batch,
                )  # fmt: skip
                log(
                    f"{k} seeds in one trial, {method}: {results['seed_batch'][f'{k}/{method}']:.0f} samples/s"
                )
    # 4a. The largest k again, its vmap(grad) under torch.compile with CUDA graphs (budget.compile with
    # seeds_per_trial > 1); the cold compile of the stacked graph counts against the budget.
    compiled_k = max(sizes.seeds_per_trial, default=0)
    for method in METHODS if seed_batch is not None and compiled_k else ():
        if clock.left() < 90 * (device.type == "cuda") + 10:
            notes["seed_batch_compiled"] = "skipped: the time budget ran out"
            break
        with section(f"seed_batch_compiled/{compiled_k}/{method}"):
            started = clock.elapsed()
            rate = seed_batch(
                preset=sizes.preset, method=method, k=compiled_k, steps=sizes.seed_batch_steps,
                device=str(device), batch_size=sizes.batch, compile="reduce-overhead",
                compile_backend=sizes.compile_backend,
            )  # fmt: skip
            results["seed_batch_compiled"][f"{compiled_k}/{method}"] = rate
            log(
                f"{compiled_k} seeds in one trial, CUDA graphs, {method}: {rate:.0f} samples/s "
                f"(with compile {clock.elapsed() - started:.0f} s)"
            )
    # 4b. k-seed trials packed as resources.gpu: auto packs them (the driver's rule on the measured peak).
    if sizes.packed_seeds and device.type == "cuda":
        for method in METHODS:
            if clock.left() < 50:
                notes["packed"] = "partly skipped: the time budget ran out"
                break
            with section(f"packed/{method}"):
                packed = packed_seed_batches(sizes, device, method, sizes.packed_seeds, log)
                results["packed"][method] = packed
    elif sizes.packed_seeds:
        notes["packed"] = "needs a CUDA device (the packing rule reads the GPU's memory)"
    # 5. The norm layer alone.
    if "layer" not in sizes.skipped:
        with section("layer/eager"):
            results["layer"]["eager"] = layer_times(sizes, device, compiled=False)
        if clock.left() > 40 * (device.type == "cuda"):
            with section("layer/compiled"):
                results["layer"]["compiled"] = layer_times(sizes, device, compiled=True)
    log(f"layer fwd+bwd: {results['layer']}")
    # 6. One trial compiled without CUDA graphs (least important: runs last, if it fits).
    for method in METHODS if "default" not in sizes.skipped else ():
        if clock.left() > 45 * (device.type == "cuda"):
            trial(method, "default")
        else:
            notes["default"] = "skipped: the time budget ran out"
    results["elapsed_s"] = clock.elapsed()
    results["torch"] = torch.__version__
    return results


# ----- the table ------------------------------------------------------------------------------------------


def _cell(rate: float | None, base: float | None) -> str:
    if rate is None:
        return "n/a"
    ratio = f" ({rate / base:.1f}x)" if base else ""
    return f"{rate:,.0f}{ratio}"


def layer_table(results: dict[str, Any], sizes: Sizes) -> list[str]:
    """The norm layer's wall time per call against nn.LayerNorm, eager and compiled."""
    errors = results["errors"]
    batch, tokens, dim = sizes.layer_shape
    lines = [
        "",
        f"| norm layer fwd+bwd on ({batch}, {tokens}, {dim}), wall time per call | AutoNorm us | "
        "nn.LayerNorm us | ratio |",
        "|---|---:|---:|---:|",
    ]
    for mode in ("eager", "compiled"):
        times = results["layer"].get(mode)
        if times is None:
            lines.append(
                f"| {mode} | {errors.get(f'layer/{mode}', 'skipped: the time budget ran out')} | | |"
            )
            continue
        auto, ln = times["autonorm"] * 1e6, times["layernorm"] * 1e6
        lines.append(f"| {mode} | {auto:.1f} | {ln:.1f} | {auto / ln:.2f}x |")
    lines += [
        "",
        "Layer times are wall time per call with the host's dispatch and autograd work included (at this "
        "size a single call is host-bound, so they are not kernel times).",
    ]
    return lines


def render(results: dict[str, Any], sizes: Sizes, device_name: str, smoke: bool) -> str:
    single, notes, errors = results["single"], results["notes"], results["errors"]
    base = {method: single[method].get("none") for method in METHODS}
    lines = [
        "## GPU throughput: one trial, concurrent trials, seed-batched trials",
        "",
        f"Device: {device_name}; torch {results['torch']}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"whole run {results['elapsed_s']:.0f} s.{' SMOKE RUN (tiny sizes, CPU): not a measurement.' if smoke else ''}",
        f"Model: {sizes.preset} {sizes.model_fields}, batch {sizes.batch}, bf16 autocast on CUDA, AdamW, "
        "the training loop's step. Data: SYNTHETIC random images of that size (no dataset on the machine); "
        f"speed only. Each figure: samples/s over a {sizes.measure_s:g} s window after warm-up "
        "(compilation excluded), and its ratio to one eager trial of the same method. Concurrent "
        "trials: separate processes on the one GPU, summed over one common window. Seed-batched rows: "
        f"benchmarks/gpu_seed_batch.py ({sizes.seed_batch_steps} timed steps of k stacked seeds via "
        "torch.func, eager unless the row says CUDA graphs, one fixed batch per seed already on the device).",
        "",
        f"| configuration | {METHOD_NAMES['frozen_ln']} samples/s (x eager) | "
        f"{METHOD_NAMES['autonorm_s']} samples/s (x eager) |",
        "|---|---:|---:|",
    ]

    def row(label: str, rates: dict[str, float | None], error_keys: dict[str, str] | None = None) -> None:
        cells = [
            errors.get((error_keys or {}).get(m, ""), "n/a")
            if rates.get(m) is None
            else _cell(rates[m], base[m])
            for m in METHODS
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    def single_row(label: str, mode: str) -> None:
        row(label, {m: single[m].get(mode) for m in METHODS}, {m: f"single/{mode}/{m}" for m in METHODS})

    single_row("1 trial, eager", "none")
    if "default" in notes:
        lines.append(f"| 1 trial, torch.compile (default) | {notes['default']} | |")
    elif "default" not in sizes.skipped:
        single_row("1 trial, torch.compile (default)", "default")
    single_row("1 trial, CUDA graphs (compile reduce-overhead)", "reduce-overhead")
    concurrent = results["concurrent"]
    for count in sizes.concurrency:
        for mode, label in (("none", "eager"), ("reduce-overhead", "CUDA graphs")):
            why_not = notes.get("concurrent") or errors.get("concurrent")
            if why_not and not any(f"{count}/{mode}/{m}" in concurrent for m in METHODS):
                lines.append(f"| {count} concurrent trial processes, {label} | {why_not} | |")
            else:
                row(f"{count} concurrent trial processes, {label}", {
                    m: concurrent.get(f"{count}/{mode}/{m}") for m in METHODS
                })  # fmt: skip
    for k in sizes.seeds_per_trial if "seed_batch" not in sizes.skipped else ():
        rates = {m: results["seed_batch"].get(f"{k}/{m}") for m in METHODS}
        if all(rate is None for rate in rates.values()):
            lines.append(f"| {k} seeds batched in one trial | {notes.get('seed_batch', 'n/a')} | |")
        else:
            row(f"{k} seeds batched in one trial", rates, {m: f"seed_batch/{k}/{m}" for m in METHODS})
    compiled_k = max(sizes.seeds_per_trial, default=0)
    if compiled_k:
        label = f"{compiled_k} seeds batched in one trial, CUDA graphs (compile reduce-overhead)"
        rates = {m: results.get("seed_batch_compiled", {}).get(f"{compiled_k}/{m}") for m in METHODS}
        if all(rate is None for rate in rates.values()) and "seed_batch_compiled" in notes:
            lines.append(f"| {label} | {notes['seed_batch_compiled']} | |")
        else:
            row(label, rates, {m: f"seed_batch_compiled/{compiled_k}/{m}" for m in METHODS})
    packed = results.get("packed", {})
    if packed:
        counts = ", ".join(
            f"{METHOD_NAMES[m]} peaks at {p['peak_gib']:.2f} GiB -> {p['processes']} per GPU"
            for m, p in packed.items()
        )
        k = next(iter(packed.values()))["k"]
        row(
            f"{k}-seed trials packed as resources.gpu: auto packs them ({counts})",
            {m: packed.get(m, {}).get("rate") for m in METHODS},
            {m: f"packed/{m}" for m in METHODS},
        )
    elif sizes.packed_seeds:
        why_not = notes.get("packed") or errors.get("packed/frozen_ln") or "n/a"
        lines.append(f"| {sizes.packed_seeds}-seed trials packed by resources.gpu: auto | {why_not} | |")
    lines += ["", "| step time, AutoNorm-S / FrozenLN | ratio |", "|---|---:|"]
    for mode, label in (("none", "eager"), ("default", "torch.compile"), ("reduce-overhead", "CUDA graphs")):
        frozen, auto = single["frozen_ln"].get(mode), single["autonorm_s"].get(mode)
        lines.append(f"| {label} | {frozen / auto:.2f}x |" if frozen and auto else f"| {label} | n/a |")
    if "layer" not in sizes.skipped:
        lines += layer_table(results, sizes)
    lines += [
        "",
        f"AutoNorm ViT under torch.compile (bf16 autocast, training mode): {results['graph_breaks']}.",
        "",
        *([f"Not measured in this run (--skip): {', '.join(sizes.skipped)}.", ""] if sizes.skipped else []),
        "Reproduce: `python3 benchmarks/gpu.py --out gpu_bench.md` on a CUDA machine with torch.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes on CPU: checks the script end to end"
    )
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    parser.add_argument(
        "--budget-s", type=float, help="time budget of the whole run (default 280, smoke 120)"
    )
    parser.add_argument(
        "--block-imports", action="store_true", help=f"make {', '.join(SERVICE_PACKAGES)} unimportable"
    )
    parser.add_argument(
        "--skip",
        help=f"comma-separated sections to leave out ({', '.join(SKIPPABLE)}), e.g. ones an earlier run measured",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one concurrent trial process
    args = parser.parse_args(argv)
    argv_extra = ["--block-imports"] if args.block_imports else []
    if args.block_imports:
        sys.meta_path.insert(0, _BlockImports(SERVICE_PACKAGES))
    import torch

    torch.set_num_threads(1)  # what a trial gets by default (resources.cpu 1 -> num_threads 1)
    # Every trial compiles a fresh model through the same forward code: allow more than dynamo's default
    # 8 cached graphs per code object, past which it would silently run eager.
    torch._dynamo.config.cache_size_limit = 64
    if args.worker:
        worker_main(json.loads(args.worker))
        return
    if args.smoke:
        # The fused C kernels of the CPU AutoNorm path are opaque to dynamo (a graph break and a recompile
        # per call); the smoke run compiles the eager composite that the GPU path compiles.
        os.environ.setdefault("NORMLAB_FUSED_NORMS", "0")
    sizes = SMOKE if args.smoke else FULL
    if args.skip:
        skipped = tuple(name.strip() for name in args.skip.split(",") if name.strip())
        unknown = sorted(set(skipped) - set(SKIPPABLE))
        if unknown:
            parser.error(
                f"--skip: unknown section(s) {', '.join(unknown)}; choose from {', '.join(SKIPPABLE)}"
            )
        sizes = replace(
            sizes,
            skipped=skipped,
            concurrency=() if "concurrent" in skipped else sizes.concurrency,
            packed_seeds=0 if "packed" in skipped else sizes.packed_seeds,
        )
    if args.budget_s is not None:
        sizes = replace(sizes, budget_s=args.budget_s)
    if args.smoke:
        device, device_name = torch.device("cpu"), f"CPU ({platform.processor() or platform.machine()})"
    else:
        if not torch.cuda.is_available():
            parser.error(
                "no CUDA device: this benchmark is for a GPU machine (use --smoke to check it on CPU)"
            )
        device, device_name = torch.device("cuda"), torch.cuda.get_device_name(0)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    results = run_benchmark(sizes, device, argv_extra, log)
    table = render(results, sizes, device_name, args.smoke)
    print(table)
    targets = [args.out] if args.out else []
    if os.environ.get("OUT"):
        targets.append(Path(os.environ["OUT"]) / "gpu_bench.md")
    for target in dict.fromkeys(targets):  # the same file once
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(table)
        target.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
