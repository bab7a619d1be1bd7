"""A rank-study trial trains the residual-MLP classifier like any model: its epoch-0 report carries the
residual MLP's init measurements, and k stacked seeds report what k single-seed runs do."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from workers.training import TrainConfig, TrainingRun
from workers.training.seed_batch import SeedBatchedRun

DEPTH = 6
CFG = TrainConfig(
    method="frozen_ln",
    dataset="digits",
    model="mlp_classifier_tiny",
    model_overrides={"depth": DEPTH},
    knobs={"norm_placement": "pre", "init_scale": 2.0, "width_expansion": 2.5},
    epochs=1,
    batch_size=64,
    lr=3e-3,
    warmup_epochs=0,
    max_steps_per_epoch=4,
    device="cpu",
)


@pytest.fixture(autouse=True)
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_a_trial_reports_the_residual_mlps_init_measurements_then_trains():
    run = TrainingRun(CFG)
    assert run.model.trunk.config.init_scale == 2.0 and run.model.trunk.config.mlp_ratio == 2.5
    epoch0 = run.initial_report()
    assert sum(k.startswith("init_branch_skip_ratio_") for k in epoch0) == DEPTH
    assert sum(k.startswith("init_erank_jacobian_") and k[-1].isdigit() for k in epoch0) == DEPTH
    assert {"init_branch_active_width", "init_branch_rank", "init_mean_drift_6"} <= set(epoch0)
    epoch1 = run.train_one_epoch()
    assert epoch1["epoch"] == 1 and epoch1["train_loss"] > 0


def test_stacked_seeds_report_the_init_measurements_of_single_seed_runs():
    stacked = SeedBatchedRun(CFG, [0, 1]).initial_report()
    for seed, report in zip((0, 1), stacked, strict=True):
        single = TrainingRun(dataclasses.replace(CFG, seed=seed)).initial_report()
        for key in ("init_erank_jacobian", "init_branch_skip_ratio_3", "init_mean_drift_6"):
            assert report[key] == pytest.approx(single[key], rel=1e-6), key
