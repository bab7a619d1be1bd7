"""The throughput probe for real, on CPU with the tiny ViT: the driver runs it on a GPU node only, but what it
times is the loop's own training step, and that runs anywhere."""

from __future__ import annotations

import pytest
import torch

from workers.training import TrainConfig
from workers.trials.throughput_probe import ThroughputRun, measure_throughput

CFG = TrainConfig(
    method="frozen_ln",
    dataset="digits",
    model="vit_lite_tiny",
    epochs=3,
    batch_size=32,
    warmup_epochs=0,
    device="cpu",
)


@pytest.fixture(autouse=True)
def one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_one_candidate_steps_for_about_a_second_and_reports_sane_samples_per_second():
    result = measure_throughput(CFG, [0], warmup_steps=2, window_s=0.5, chunk_steps=3)
    # The tiny ViT at batch 32 on one CPU thread: hundreds to tens of thousands of samples/s.
    assert 100 < result.samples_per_s < 100_000
    assert result.step_s == pytest.approx(32 / result.samples_per_s, rel=0.01)
    assert result.overhead_s >= 0 and result.peak_bytes == 0 and result.device == "cpu"
    # digits: 1437 training images, 45 batches of 32 (the last one short): one seed's epoch
    assert result.samples_per_seed_epoch == 1437


def test_a_seed_batch_counts_every_seeds_samples_and_windows_start_on_time():
    import time

    run = ThroughputRun(CFG, [0, 1])
    try:
        assert run.warm_up(2) > 0 and run.warmup_steps == 2
        start_at = time.time() + 0.2
        window = run.window(0.3, start_at=start_at, chunk_steps=2)
        assert time.time() >= start_at + 0.3
        assert window.steps % 2 == 0 and window.samples == window.steps * 32 * 2  # two seeds per step
        assert run.overhead_s(window.step_s) >= 0
    finally:
        run.close()
