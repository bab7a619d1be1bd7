"""Where one training step's time goes, phase by phase, for FrozenLN and AutoNorm-S.

    python3 benchmarks/gpu_step_profile.py [--steps N] [--out FILE]   # on a CUDA machine, about 2 minutes
    python3 benchmarks/gpu_step_profile.py --smoke                   # tiny sizes on CPU: checks the script

The H200 run of 2026-12-04 left the AutoNorm-S step at 1.55x FrozenLN's under CUDA graphs while the model's
forward+backward was level (1.06x), so the gap lies outside the captured model; this says where. For each
method and mode (eager; CUDA graphs, i.e. compile reduce-overhead) the step of benchmarks/gpu.py (the
training loop's step, `TrialStep`) is warmed up, its wall time per step is taken without the profiler, and
then `--steps` steps run under torch.profiler with each phase of the step as a range (`TrialStep.PHASES`:
batch, forward, gate_entropy, loss, backward, clip, optimizer). Per phase: host time (the range's wall time on the
step's thread, per step) and device time (every kernel launched while the range was open, from any
thread: the backward runs on autograd's own; per step; 0 on CPU). Needs only torch and the
torch-only packages gpu.py needs (models/, workers/training); SYNTHETIC data, speed only. Its "CUDA graphs"
step is gpu.py's, with only the forward and backward captured (the path before budget.compile compiled the
whole step; benchmarks/gpu_whole_step.py times both).
"""

from __future__ import annotations

import argparse
import bisect
import sys
import time
from collections.abc import Iterable
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


def _self_device_us(event: Any) -> float:
    """The device time of the kernels an event itself launched (not its children's), in microseconds."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def _on_host(event: Any) -> bool:
    return str(getattr(event, "device_type", "CPU")).endswith("CPU")


def phase_times(events: Iterable[Any], steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """(host, device) ms per step of each phase, from torch.profiler's events.

    Host: the wall time of the phase's range on the thread that ran the step. Device: every kernel launched
    while that range was open, from any thread, each counted once (by the event that launched it): the
    backward's ops run on autograd's own thread, so they are not among the range's children, and a sum
    over children would give the backward no device time. A range is counted once, on the host (on CUDA it
    also shows up as a GPU-side annotation)."""
    events = [event for event in events if _on_host(event)]
    ranges = sorted(
        (event.time_range.start, event.time_range.end, event.name.removeprefix("step/"))
        for event in events
        if event.name.startswith("step/") and event.name.removeprefix("step/") in TrialStep.PHASES
    )
    host = dict.fromkeys(TrialStep.PHASES, 0.0)
    device = dict.fromkeys(TrialStep.PHASES, 0.0)
    for start, end, phase in ranges:
        host[phase] += (end - start) / 1000 / steps
    starts = [start for start, _, _ in ranges]
    for event in events:
        launched = _self_device_us(event)
        index = bisect.bisect_right(starts, event.time_range.start) - 1
        if launched and index >= 0 and event.time_range.start < ranges[index][1]:
            device[ranges[index][2]] += launched / 1000 / steps
    return host, device


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
    host, gpu = phase_times(prof.events(), steps)
    return {"wall_ms": elapsed / count * 1000, "host_ms": host, "device_ms": gpu}


def render(results: dict[tuple[str, str], dict[str, Any]], device_name: str, steps: int, smoke: bool) -> str:
    lines = [
        "## One training step, phase by phase (benchmarks/gpu_step_profile.py)",
        "",
        f"Device: {device_name}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {steps} profiled steps"
        f"{'; SMOKE RUN (tiny sizes, CPU): not a measurement' if smoke else ''}. Wall: ms per step without the"
        " profiler. Host: the phase's wall time on the step's thread; device: the kernels launched while it ran,"
        " from any thread (ms per step).",
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
