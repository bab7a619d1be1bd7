"""Training-step time of ViT-Lite (paper preset) with each norm, relative to FrozenLN.

    python -m benchmarks.bench_model_step [--quick]

One step = forward, cross-entropy, backward, AdamW step, on a CIFAR-sized batch. Models are stepped
interleaved (round robin) and the median per model is reported. One thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from benchmarks.bench_norms import interleaved_medians
from models import build_model
from studies.methods import norm_for_method

METHODS = ("frozen_ln", "autonorm_s", "dyt", "random_selector", "film", "adanorm")


def _train_step(method: str, batch: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = build_model("vit_lite_paper", {"norm": norm_for_method(method).kind}).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=3e-2)
    images, labels = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images), labels, label_smoothing=0.1).backward()
        optimizer.step()

    return step


def run(quick: bool = False) -> str:
    torch.set_num_threads(1)
    batch = 64
    methods = METHODS[:2] if quick else METHODS
    steps = {method: _train_step(method, batch) for method in methods}
    repeats = 5 if quick else 15
    medians = interleaved_medians(steps, repeats=repeats, warmup=2)
    base = medians["frozen_ln"]
    lines = [
        "## ViT-Lite training step vs FrozenLN",
        "",
        f"Preset vit_lite_paper (8 layers, 4 heads, dim 128, patch 4), batch {batch} of 3x32x32, "
        f"AdamW, CPU, 1 thread, {repeats} interleaved repetitions, median.",
        "",
        "| method | median ms | ratio to FrozenLN |",
        "|---|---:|---:|",
    ]
    for method, value in medians.items():
        lines.append(f"| {method} | {value * 1e3:.1f} | {value / base:.3f}x |")
    lines += ["", "Reproduce: `python -m benchmarks.bench_model_step`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print(run(quick=parser.parse_args().quick))
