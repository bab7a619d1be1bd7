"""Forward + backward time of every norm layer relative to torch.nn.LayerNorm on the same input.

    python -m benchmarks.bench_norms [--quick]

Layers are timed interleaved (one repetition of each, round robin), so machine noise hits all of them
alike; the table reports the median per layer and its ratio to torch.nn.LayerNorm. One thread.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch

from models.norms import NORM_KINDS, build_norm
from models.norms._kernel_loader import load_mixed_norm_library

SHAPE = (64, 65, 256)  # (B, T, D): a ViT-Lite batch on 32x32 images, patch 4, width 256


def _step(layer: torch.nn.Module, x: torch.Tensor, upstream: torch.Tensor) -> Callable[[], None]:
    inputs = [x, *layer.parameters()]

    def run() -> None:
        out = layer(x)
        torch.autograd.grad(out, inputs, upstream, allow_unused=True)

    return run


def interleaved_medians(
    steps: dict[str, Callable[[], None]], repeats: int, warmup: int = 3
) -> dict[str, float]:
    for step in steps.values():
        for _ in range(warmup):
            step()
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def run(quick: bool = False) -> str:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(*SHAPE, requires_grad=True)
    upstream = torch.randn(*SHAPE)
    layers: dict[str, torch.nn.Module] = {"torch.nn.LayerNorm": torch.nn.LayerNorm(SHAPE[-1])}
    for kind in NORM_KINDS:
        layers[kind] = build_norm(kind, SHAPE[-1]).train()
    steps = {name: _step(layer, x, upstream) for name, layer in layers.items()}
    medians = interleaved_medians(steps, repeats=10 if quick else 40)
    base = medians["torch.nn.LayerNorm"]
    fused = "fused C kernel" if load_mixed_norm_library() is not None else "eager fallback (no kernel)"
    lines = [
        "## Norm layers: forward + backward vs torch.nn.LayerNorm",
        "",
        f"Input (B, T, D) = {SHAPE}, float32, CPU ({platform.processor() or platform.machine()}), 1 thread, "
        f"train mode, {10 if quick else 40} interleaved repetitions, median. Mixed norms use the {fused}.",
        "",
        "| layer | median ms | ratio to LayerNorm |",
        "|---|---:|---:|",
    ]
    for name, value in medians.items():
        lines.append(f"| {name} | {value * 1e3:.3f} | {value / base:.2f}x |")
    lines += ["", "Reproduce: `python -m benchmarks.bench_norms`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print(run(quick=parser.parse_args().quick))
