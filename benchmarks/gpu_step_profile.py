"""Where one training step's time goes, phase by phase, for FrozenLN and AutoNorm-S.

    python3 benchmarks/gpu_step_profile.py [--steps N] [--out FILE]   # on a CUDA machine, about 2 minutes
    python3 benchmarks/gpu_step_profile.py --smoke                   # tiny sizes on CPU: checks the script

The H200 run of 2026-12-04 left the AutoNorm-S step at 1.55x FrozenLN's under CUDA graphs while the model's
forward+backward was level (1.06x), so the gap lies outside the captured model; this says where. For each
method and mode (eager; CUDA graphs, i.e. compile reduce-overhead) the step of benchmarks/gpu.py (the
training loop's step, `TrialStep`) is warmed up, its wall time per step is taken without the profiler, and
then `--steps` steps run under torch.profiler with each phase of the step as a range (`TrialStep.PHASES`:
batch, forward, gate_entropy, loss, backward, clip, optimizer). Per phase: host time (CPU time inside the
range, per step) and device time (the kernels it launched, per step; 0 on CPU). Needs only torch and the
torch-only packages gpu.py needs (models/, workers/training); SYNTHETIC data, speed only.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file, not as a module
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.gpu import (  # noqa: E402
    FULL,
    METHOD_NAMES,
    METHODS,
    SMOKE,
    Sizes,
    TrialStep,
    measure_steps,
    warm_up,
)

MODES = {"none": "eager", "reduce-overhead": "CUDA graphs"}


def _device_us(event: Any) -> float:
    """An event's device time in microseconds, under the name this torch release gives it."""
    for name in ("device_time_total", "cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def profile_step(method: str, mode: str, sizes: Sizes, device: Any, steps: int) -> dict[str, Any]:
    """Wall ms per step (no profiler), then host and device ms per step of each phase (profiled)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    step = TrialStep(method, mode, sizes, device, phases=True)
    warm_up(step, device, sizes.warmup_steps)
    count, elapsed = measure_steps(step, device, sizes.measure_s)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    host = dict.fromkeys(TrialStep.PHASES, 0.0)
    gpu = dict.fromkeys(TrialStep.PHASES, 0.0)
    for event in prof.events():
        if not event.name.startswith("step/"):
            continue
        phase = event.name.removeprefix("step/")
        if phase not in host:
            continue
        # A range shows up on the host (its CPU time and the device time of what it launched) and, on CUDA,
        # once more as a GPU-side annotation; count the host one only, so nothing is counted twice.
        if getattr(event, "device_type", None) is not None and str(event.device_type).endswith("CPU"):
            host[phase] += event.cpu_time_total / 1000 / steps
            gpu[phase] += _device_us(event) / 1000 / steps
    return {"wall_ms": elapsed / count * 1000, "host_ms": host, "device_ms": gpu}


def render(results: dict[tuple[str, str], dict[str, Any]], device_name: str, steps: int, smoke: bool) -> str:
    lines = [
        "## One training step, phase by phase (benchmarks/gpu_step_profile.py)",
        "",
        f"Device: {device_name}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {steps} profiled steps"
        f"{'; SMOKE RUN (tiny sizes, CPU): not a measurement' if smoke else ''}. Wall: ms per step without the"
        " profiler. Host: CPU time inside the phase; device: the kernels it launched (ms per step).",
        "",
        "| method | mode | wall ms/step | "
        + " | ".join(f"{p} host / device" for p in TrialStep.PHASES)
        + " |",
        "|---|---|---:|" + "---:|" * len(TrialStep.PHASES),
    ]
    for (method, mode), result in results.items():
        cells = [f"{result['host_ms'][p]:.2f} / {result['device_ms'][p]:.2f}" for p in TrialStep.PHASES]
        lines.append(
            f"| {METHOD_NAMES[method]} | {MODES[mode]} | {result['wall_ms']:.2f} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "| mode | AutoNorm-S / FrozenLN wall | " + " | ".join(TrialStep.PHASES) + " (host) |"]
    lines.append("|---|---:|" + "---:|" * len(TrialStep.PHASES))
    for mode in MODES:
        frozen, auto = results.get(("frozen_ln", mode)), results.get(("autonorm_s", mode))
        if not (frozen and auto):
            continue
        ratios = [
            f"{auto['host_ms'][p] / frozen['host_ms'][p]:.2f}x" if frozen["host_ms"][p] else "n/a"
            for p in TrialStep.PHASES
        ]
        lines.append(
            f"| {MODES[mode]} | {auto['wall_ms'] / frozen['wall_ms']:.2f}x | " + " | ".join(ratios) + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes on CPU: checks the script end to end"
    )
    parser.add_argument("--steps", type=int, default=20, help="profiled steps per method and mode")
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # what a trial gets by default, as in gpu.py
    torch._dynamo.config.cache_size_limit = 64
    if args.smoke:
        sizes, device, device_name = SMOKE, torch.device("cpu"), "CPU"
    elif torch.cuda.is_available():
        sizes, device, device_name = FULL, torch.device("cuda"), torch.cuda.get_device_name(0)
    else:
        parser.error("no CUDA device: this profile is for a GPU machine (use --smoke to check it on CPU)")
    sizes = replace(sizes, measure_s=min(sizes.measure_s, 2.0))
    results = {}
    for method in METHODS:
        for mode in MODES:
            started = time.perf_counter()
            results[method, mode] = profile_step(method, mode, sizes, device, max(1, args.steps))
            print(
                f"[{time.strftime('%H:%M:%S')}] {method} {mode}: {results[method, mode]['wall_ms']:.2f} ms/step "
                f"({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    table = render(results, device_name, args.steps, args.smoke)
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
