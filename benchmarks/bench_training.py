"""Training throughput of ViT-Lite on Fashion-MNIST and the share of each epoch spent logging and reporting.

    python -m benchmarks.bench_training [--quick]

One training run per method (the paper's ViT-Lite: 8 layers, 4 heads, dim 128, patch 4, batch 128) with a
capped number of optimizer steps per epoch, reporting every epoch exactly as a trial does: an atomic
checkpoint, a copy of it into a storage directory (what `tune.report(checkpoint=...)` does with local
storage) and the metrics queued to a real `mlflow server` (SQLite backend) through the asynchronous
TrialTracker. The logging share is the time the training thread spends in those steps over the epoch
wall time; for comparison, the cost of one synchronous `log_batch` per epoch is measured against the same
server. Falls back to `digits` (and says so) when the Fashion-MNIST offline source is not installed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

import workers.training.loop as loop_module
from service.stack.local_stack import mlflow_server as mlflow_server_process
from service.stack.processes import free_port
from workers.tracking.tracker import TrialTracker
from workers.training import TrainConfig, run_training

METHODS = ("frozen_ln", "autonorm_s")
FULL = {"epochs": 3, "steps": 20}
QUICK = {"epochs": 2, "steps": 4}


@contextmanager
def mlflow_server(root: Path) -> Iterator[str]:
    """The real `mlflow server` that `make run` starts, on a free loopback port, stopped on exit."""
    port = free_port()
    server = mlflow_server_process(data_dir=root, host="127.0.0.1", port=port)
    server.start(timeout=120)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _dataset() -> tuple[str, str]:
    from workers.data import DataUnavailableError, get_dataset

    try:
        get_dataset("fashion_mnist", download=False)
        return "fashion_mnist", "vit_lite_paper"
    except DataUnavailableError:
        return "digits", "vit_lite_tiny"


def _measure(
    method: str, dataset: str, model: str, budget: dict[str, int], uri: str, work: Path
) -> dict[str, Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment_id = client.create_experiment(f"bench-{method}-{uuid.uuid4().hex[:6]}")
    tracker = TrialTracker(tracking_uri=uri, experiment_id=experiment_id, trial_key=f"bench/{method}")
    tracker.start()
    cfg = TrainConfig(
        method=method, dataset=dataset, model=model, epochs=budget["epochs"], batch_size=128,
        warmup_epochs=1, max_steps_per_epoch=budget["steps"], num_threads=torch.get_num_threads(),
        progress=False,
        # AutoNorm-S must decide before the last epoch (t_freeze < epochs), or it is plain AutoNorm.
        knobs={"t_freeze": 1} if method == "autonorm_s" else {},
    )  # fmt: skip
    timings: dict[int, dict[str, float]] = {}
    storage = work / f"storage-{method}"
    real_save = loop_module.save_checkpoint
    save_times: list[float] = []

    def timed_save(path: Path, state: dict) -> None:
        started = time.perf_counter()
        real_save(path, state)
        save_times.append(time.perf_counter() - started)

    def report(metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        started = time.perf_counter()
        tracker.log_metrics(metrics, step=int(metrics["epoch"]))
        logged = time.perf_counter()
        if checkpoint_dir is not None:
            shutil.copytree(checkpoint_dir, storage / f"checkpoint_{metrics['epoch']:06d}")
        timings[int(metrics["epoch"])] = {
            "log_s": logged - started,
            "copy_s": time.perf_counter() - logged,
            "epoch_time_s": float(metrics["epoch_time_s"]),
            "samples_per_s": float(metrics.get("samples_per_s", 0.0)),
        }

    loop_module.save_checkpoint = timed_save
    try:
        run_training(cfg, checkpoint_dir=work / f"ckpt-{method}", report=report)
    finally:
        loop_module.save_checkpoint = real_save
    started = time.perf_counter()
    delivered = tracker.close("FINISHED")
    close_s = time.perf_counter() - started

    # The synchronous alternative: one blocking log_batch per epoch from the training thread.
    from mlflow.entities import Metric

    run_id = client.create_run(experiment_id).info.run_id
    sync_times = []
    for step in range(5):
        batch = [
            Metric(k, 0.5, int(time.time() * 1000), step) for k in ("a", "b", "c", "d", "e", "f", "g", "h")
        ]
        started = time.perf_counter()
        client.log_batch(run_id, metrics=batch, synchronous=True)
        sync_times.append(time.perf_counter() - started)

    epochs = [timings[e] for e in sorted(timings) if e >= 1]
    per_epoch_overhead = [
        t["log_s"] + t["copy_s"] + save + close_s / len(epochs)
        for t, save in zip(epochs, save_times, strict=True)
    ]
    epoch_wall = [t["epoch_time_s"] + o for t, o in zip(epochs, per_epoch_overhead, strict=True)]
    return {
        "samples_per_s": statistics.median(t["samples_per_s"] for t in epochs),
        "epoch_wall_s": statistics.median(epoch_wall),
        "log_ms": 1000 * statistics.median(t["log_s"] for t in epochs),
        "checkpoint_ms": 1000 * statistics.median(save_times),
        "copy_ms": 1000 * statistics.median(t["copy_s"] for t in epochs),
        "close_ms": 1000 * close_s,
        "share": sum(per_epoch_overhead) / sum(epoch_wall),
        "logging_only_share": sum(t["log_s"] + close_s / len(epochs) for t in epochs) / sum(epoch_wall),
        "overhead_s": statistics.median(per_epoch_overhead),
        "sync_log_ms": 1000 * statistics.median(sync_times),
        "delivered": delivered,
        "steps": budget["steps"],
    }


def run(quick: bool = False) -> str:
    budget = QUICK if quick else FULL
    dataset, model = _dataset()
    from workers.data import get_dataset

    train_size = len(get_dataset(dataset).train)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-training-") as tmp:
        work = Path(tmp)
        with mlflow_server(work) as uri:
            results = {method: _measure(method, dataset, model, budget, uri, work) for method in METHODS}
    for method, r in results.items():
        full_epoch_s = train_size / r["samples_per_s"] + (
            r["epoch_wall_s"] - r["steps"] * 128 / r["samples_per_s"]
        )
        rows.append(
            f"| {method} | {r['samples_per_s']:.0f} | {r['epoch_wall_s']:.1f} | {r['log_ms']:.2f} | "
            f"{r['checkpoint_ms']:.0f} | {r['copy_ms']:.0f} | {r['close_ms']:.0f} | "
            f"{100 * r['logging_only_share']:.3f} % | {100 * r['share']:.2f} % | "
            f"{100 * r['overhead_s'] / full_epoch_s:.3f} % | {r['sync_log_ms']:.0f} | "
            f"{'yes' if r['delivered'] else 'NO'} |"
        )
    substitute = "" if dataset == "fashion_mnist" else " (Fashion-MNIST offline source missing: ran `digits`)"
    return (
        "## Training throughput and logging overhead (benchmarks/bench_training.py)\n\n"
        f"Dataset `{dataset}`{substitute}, model `{model}`, batch 128, {torch.get_num_threads()} torch "
        f"threads, {budget['steps']} optimizer steps per epoch, {budget['epochs']} epochs (+ the epoch-0 "
        "report). Each epoch = capped training + the full validation pass; reporting = metrics queued to a "
        "real `mlflow server` (SQLite) via the asynchronous TrialTracker, an atomic checkpoint, and a copy "
        "of it into a storage directory (what `tune.report` does with local storage). `close` is the final "
        "flush, spread over the epochs in the shares. The full-epoch share projects the same per-epoch "
        f"overhead onto a whole epoch ({train_size} training samples at the measured rate).\n\n"
        "| method | train samples/s | epoch wall (s) | log call (ms) | checkpoint (ms) | storage copy (ms) | "
        "close (ms) | MLflow share | logging+reporting share | share, full epoch | sync log_batch (ms) | "
        "all delivered |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n" + "\n".join(rows) + "\n\n"
        "Target: under 2 % of epoch wall time in logging and reporting. The synchronous column is what one "
        "blocking `log_batch` per epoch would cost the training thread instead of the queued call.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
