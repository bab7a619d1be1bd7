"""The start-of-study throughput probe (issue 39, item 2) on a real GPU: what it measures, what it chooses.

    python3 benchmarks/gpu_throughput_probe.py --out gpu_throughput_probe.md
    python3 benchmarks/gpu_throughput_probe.py --ray --trials-per-gpu 8      # packed trials, as a study
    python3 benchmarks/gpu_throughput_probe.py --device cpu --budget-s 10    # a smoke run of this script

For each method: the probe trial a study of `--seeds` seeds would measure (the loop's own training step on
the dataset, `--model` at batch `--batch-size`), every candidate of workers.trials.throughput (seeds per
trial k in {1, 4, 8} capped at the seeds, compile none / reduce-overhead) measured by the driver's own
schedule (measure_settings) within the study's bound (PROBE_BUDGET_S), the decision for a study of
`--epochs` epochs, and the measurement's wall time. In-process (default): one probe process, so one trial
per GPU only. With --ray: n probe processes as Ray actors sharing the GPU (workers.driver.throughput's
RayProbePool), so each candidate is measured alone and n together, as a study measures it.

Needs the workers' environment (torch; scikit-learn for digits, the default dataset, which needs no
download; Ray for --ray). Never report a figure this script did not print.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class LocalPool:
    """One in-process probe process (workers.trials.throughput_probe.ProbeProcess): one trial per GPU."""

    def __init__(self, base_config: dict, device: str) -> None:
        from workers.trials.throughput_probe import ProbeProcess

        self.process = ProbeProcess(base_config, device)
        self.size, self.same_gpu = 1, True

    def prepare(self, config, count, timeout_s):
        return [self.process.prepare(config)]

    def window(self, count, seconds, timeout_s):
        return [self.process.window(time.time(), seconds)]

    def release(self):
        self.process.release()

    def close(self):
        self.process.release()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--model", default="vit_lite_tiny")
    parser.add_argument("--methods", default="frozen_ln,autonorm_s")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--ray", action="store_true", help="n probe processes on the GPU through Ray actors")
    parser.add_argument("--trials-per-gpu", type=int, default=8, help="n, with --ray")
    parser.add_argument("--budget-s", type=float, default=None, help="default: the study's PROBE_BUDGET_S")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    from studies.trial_config import Key, seed_fields
    from workers.trials.throughput import PROBE_BUDGET_S, ThroughputChoice, decide, measure_settings

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --device cpu for a smoke run")
    budget_s = PROBE_BUDGET_S if args.budget_s is None else args.budget_s
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    seeds = list(range(args.seeds))
    started = time.perf_counter()
    lines = [
        f"Throughput probe on {device_name} (torch {torch.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): {args.dataset}, {args.model}, batch "
        f"{args.batch_size}, {args.seeds} seeds, {args.epochs} epochs; bound {budget_s:g} s; "
        + (f"{args.trials_per_gpu} Ray probe processes on the GPU" if args.ray else "one probe process"),
        "",
    ]
    for method in args.methods.split(","):
        base = {
            Key.STUDY_ID: "probe",
            Key.PHASE: "final",
            Key.DATASET: args.dataset,
            Key.MODEL: args.model,
            Key.METHOD: method,
            Key.EPOCHS: args.epochs,
            Key.BATCH_SIZE: args.batch_size,
            Key.SEED: 0,
        }
        if method == "autonorm_s":
            base[Key.KNOBS] = {"t_freeze": max(1, args.epochs - 1)}

        def config_for(k: int, compile_mode: str, base: dict = base) -> dict:
            return {**base, **seed_fields(seeds[:k]), Key.COMPILE: compile_mode}

        opened = time.perf_counter()
        if args.ray:
            import ray

            from workers.driver.throughput import START_TIMEOUT_S, RayProbePool

            if not ray.is_initialized():
                ray.init(include_dashboard=False)
            n = args.trials_per_gpu
            pool = RayProbePool(
                n, cpu=1, gpu_share=int(10_000 / n) / 10_000, base_config=base, start_timeout_s=START_TIMEOUT_S,
                device=args.device,
            )  # fmt: skip
            trials_per_gpu = sorted({1, n})
        else:
            pool, trials_per_gpu = LocalPool(base, args.device), [1]
        ready = time.perf_counter()
        try:
            measured = measure_settings(
                pool, config_for, num_seeds=args.seeds, trials_per_gpu=trials_per_gpu, budget_s=budget_s
            )
        finally:
            pool.close()
        done = time.perf_counter()
        samples_per_seed = float(measured.samples_per_seed_epoch * args.epochs)
        setting = decide(measured.measurements, samples_per_seed=samples_per_seed)
        lines.append(
            f"{method}: probe processes ready in {ready - opened:.0f} s, candidates measured in "
            f"{done - ready:.0f} s ({'complete' if measured.complete else 'cut by the bound'})"
        )
        if setting is None:
            lines += ["no choice: one eager seed per trial was not measured", ""]
            continue
        choice = ThroughputChoice(
            setting=setting,
            measurements=measured.measurements,
            samples_per_seed=samples_per_seed,
            gpu=device_name,
            source="measured",
            probed_method=method,
        )
        lines += [
            f"choice: {choice.describe()}",
            "",
            "| candidate | samples/s per GPU | build + warm-up per trial (s) | amortised samples/s | x one eager seed "
            "per trial |",
            "|---|---:|---:|---:|---:|",
        ]
        for row in choice.rows():
            label = (
                f"{row['seeds_per_trial']} seed(s), compile {row['compile']}, {row['trials_per_gpu']} per GPU"
                + (" (chosen)" if row["chosen"] else "")
            )
            if row["samples_per_s"] is None:
                lines.append(f"| {label} | {row['note']} | | | |")
            else:
                lines.append(
                    f"| {label} | {row['samples_per_s']:,.0f} | {row['overhead_s']:.1f} | "
                    f"{row['effective_samples_per_s']:,.0f} | {row['x_baseline']:.2f}x |"
                )
        lines.append("")
    lines.append(f"whole run {time.perf_counter() - started:.0f} s")
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
