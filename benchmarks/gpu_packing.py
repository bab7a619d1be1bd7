"""Packed seed-batched trials against one eager trial, on one GPU: the short companion of gpu.py.

    python3 benchmarks/gpu_packing.py --out gpu_packing.md
    python3 benchmarks/gpu_packing.py --compile reduce-overhead   # each packed trial under CUDA graphs

For each method: one eager trial's samples/s (the baseline of every ratio in gpu.py's table), then
k-seed trials packed as `resources.gpu: auto` packs them (gpu.packed_seed_batches: one trial's measured
peak -> the driver's rule -> that many processes stepping one common window). Needs only torch and
models/ + workers/training + workers/driver/trial_plan (no Ray, MLflow or pydantic).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gpu import FULL, METHOD_NAMES, METHODS, TrialStep, measure_steps, packed_seed_batches, warm_up


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--k", type=int, default=FULL.packed_seeds)
    parser.add_argument("--compile", default="none", choices=("none", "default", "reduce-overhead"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_packing.py needs a CUDA device (the packing rule reads the GPU's memory)")
    device = torch.device("cuda")
    started = time.perf_counter()
    rows = []
    for method in METHODS:
        step = TrialStep(method, "none", FULL, device)
        warm_up(step, device, FULL.warmup_steps)
        count, elapsed = measure_steps(step, device, FULL.measure_s)
        base = count * FULL.batch / elapsed
        del step
        torch.cuda.empty_cache()
        packed = packed_seed_batches(FULL, device, method, args.k, print, compile=args.compile)
        rows.append(
            f"| {METHOD_NAMES[method]} | {base:,.0f} | {packed['processes']} x {args.k} seeds, compile {args.compile} "
            f"(peak {packed['peak_gib']:.2f} GiB each) | {packed['rate']:,.0f} | {packed['rate'] / base:.1f}x |"
        )
    table = "\n".join(
        [
            f"Packed seed-batched trials on {torch.cuda.get_device_name()} (torch {torch.__version__}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.perf_counter() - started:.0f} s); "
            f"{FULL.preset}, batch {FULL.batch}, bf16, SYNTHETIC data, {FULL.measure_s:g} s windows.",
            "",
            "| method | 1 eager trial, samples/s | packed as resources.gpu: auto | samples/s | x eager |",
            "|---|---:|---|---:|---:|",
            *rows,
        ]
    )
    print(table)
    if args.out is not None:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
