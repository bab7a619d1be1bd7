"""Training throughput of k seeds stacked in one process (workers.training.seed_step), for the GPU table.

    python -m benchmarks.gpu_seed_batch --preset vit_lite_paper --method frozen_ln --k 32 --device cuda
    python -m benchmarks.gpu_seed_batch ... --compile reduce-overhead   # the step under CUDA graphs

One measured step is exactly the seed-batched training step (vmap(grad) forward/backward of k stacked
ViT-Lite models, per-seed clipping, AdamW on the stacked tensors, schedule), with the preset's own
dropout and drop-path, bf16 autocast on CUDA, on one fixed synthetic CIFAR-shaped batch per seed that
already sits on the device (no data loading, no evaluation). With `--compile`, the vmap(grad) of the
step runs under torch.compile as `budget.compile` runs it (workers.training.compiled.CompiledCall); the
compilation falls in the untimed warm-up. Only torch is needed on this path: no Ray, MLflow or data
registry.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import torch

__all__ = ["build_seed_batched_step", "measure_seed_batched", "serve_seed_batch"]

WARMUP_STEPS = 3  # first steps pay allocator growth and kernel selection


def build_seed_batched_step(
    preset: str,
    method: str,
    k: int,
    device: str,
    batch_size: int,
    total_steps: int = 10**6,
    *,
    compile: str = "none",
    compile_backend: str = "inductor",
) -> Callable[[], None]:
    """One seed-batched training step of k stacked ViT-Lite models (seed i for model i, as a trial builds
    them) on one fixed synthetic batch per seed already on `device`, its vmap(grad) compiled with mode
    `compile` ("none": eager); call it to step. It raises if a requested compile fell back to eager, so a
    figure is never labelled compiled when it was not."""
    from models import build_model
    from models.presets import PRESETS
    from studies.methods import norm_for_method
    from workers.training.metrics import TaskLoss
    from workers.training.schedule import build_warmup_cosine
    from workers.training.seed_step import SeedBatchedStep, build_stacked_optimizer
    from workers.training.seeding import seed_everything
    from workers.training.stacked import StackedModels

    if k < 1 or batch_size < 1:
        raise ValueError(f"k and batch_size must be >= 1, got {k}, {batch_size}")
    vit_presets = sorted(name for name, fields in PRESETS.items() if fields["model"] == "vit_lite")
    if preset not in vit_presets:
        raise ValueError(
            f"measure_seed_batched takes a ViT-Lite preset ({', '.join(vit_presets)}), got {preset!r}"
        )
    target = torch.device(device)
    kind = norm_for_method(method).kind
    models = []
    for seed in range(k):
        seed_everything(seed)
        models.append(build_model(preset, {"norm": kind}))
    config = models[0].config
    stacked = StackedModels(models).to(target)
    del models
    optimizer, _ = build_stacked_optimizer(stacked, lr=5e-4, weight_decay=3e-2)
    scheduler = build_warmup_cosine(optimizer, warmup_steps=min(total_steps, 5), total_steps=total_steps)
    step = SeedBatchedStep(
        stacked,
        loss_fn=TaskLoss("image_classification", label_smoothing=0.1),
        optimizer=optimizer,
        scheduler=scheduler,
        grad_clip=1.0,
        device=target,
        amp=True,
        compile=compile,
        compile_backend=compile_backend,
    )
    stacked.template.train()
    generator = torch.Generator().manual_seed(0)
    shape = (k, batch_size, config.in_channels, config.image_size, config.image_size)
    images = torch.randn(shape, generator=generator).to(target)  # (k, B, C, H, W)
    labels = torch.randint(0, config.num_classes, (k, batch_size), generator=generator).to(target)  # (k, B)

    def one_step() -> None:
        step(images, labels)
        if compile != "none" and not step.compiled:
            raise RuntimeError(f"compile {compile} was requested but the step fell back to eager")

    return one_step


def measure_seed_batched(
    preset: str,
    method: str,
    k: int,
    steps: int,
    device: str,
    batch_size: int,
    *,
    compile: str = "none",
    compile_backend: str = "inductor",
) -> float:
    """Aggregate samples/s (k * batch_size per step, all seeds together) of `steps` seed-batched training
    steps of ViT-Lite preset `preset` with normalization method `method` on `device`, after
    WARMUP_STEPS untimed steps (which include any compilation)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    target = torch.device(device)
    step = build_seed_batched_step(
        preset, method, k, device, batch_size, total_steps=WARMUP_STEPS + steps,
        compile=compile, compile_backend=compile_backend,
    )  # fmt: skip
    for _ in range(WARMUP_STEPS):
        step()
    _synchronize(target)
    started = time.perf_counter()
    for _ in range(steps):
        step()
    _synchronize(target)
    elapsed = time.perf_counter() - started
    return k * batch_size * steps / elapsed


def serve_seed_batch(
    preset: str, method: str, k: int, device: str, batch_size: int, *, compile: str = "none"
) -> None:
    """A packed trial process for benchmarks.gpu: builds and warms a k-seed step (compiled with mode
    `compile`), prints {"ready", "peak_bytes", "device_bytes"} (the peak that resources.gpu: auto would
    pack by), then answers each {"start_at", "seconds"} line on stdin with {"steps", "elapsed"} of a
    timed window."""
    target = torch.device(device)
    step = build_seed_batched_step(preset, method, k, device, batch_size, compile=compile)
    for _ in range(WARMUP_STEPS):
        step()
    _synchronize(target)
    cuda = target.type == "cuda"
    peak = torch.cuda.max_memory_reserved(target) if cuda else 0
    total = torch.cuda.get_device_properties(target).total_memory if cuda else 0
    print(json.dumps({"ready": True, "peak_bytes": int(peak), "device_bytes": int(total)}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("stop"):
            break
        time.sleep(max(0.0, request["start_at"] - time.time()))
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < request["seconds"]:
            step()
            count += 1
        _synchronize(target)
        print(json.dumps({"steps": count, "elapsed": time.perf_counter() - started}), flush=True)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="vit_lite_paper")
    parser.add_argument("--method", default="frozen_ln")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--compile", default="none", choices=("none", "default", "reduce-overhead"))
    parser.add_argument("--serve", action="store_true", help="run as a packed trial process (benchmarks.gpu)")
    args = parser.parse_args()
    if args.serve:
        serve_seed_batch(args.preset, args.method, args.k, args.device, args.batch_size, compile=args.compile)
        sys.exit(0)
    rate = measure_seed_batched(
        args.preset, args.method, args.k, args.steps, args.device, args.batch_size, compile=args.compile
    )
    print(
        f"{args.preset} {args.method} k={args.k} batch {args.batch_size} compile {args.compile} on "
        f"{args.device}: {rate:,.0f} samples/s"
    )
