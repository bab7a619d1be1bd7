"""A spec's corruption options travel through the trial config into the final-phase metrics."""

from __future__ import annotations

import pytest

from studies.spec import validate_spec_data
from workers.training import TrainConfig, run_training


def test_chosen_corruptions_and_severities_become_final_metrics_with_their_mean(tmp_path):
    spec = validate_spec_data(
        {
            "name": "c",
            "dataset": "digits_c",
            "methods": ["frozen_ln"],
            "data": {"corruptions": ["contrast", "impulse_noise"], "severities": [1, 5]},
        }
    )
    # As the driver builds it: the study's base keys plus one trial's own.
    trial = {"dataset": "digits_c", "model": "vit_lite_tiny", **spec.data.trial_config()}
    cfg = TrainConfig.from_trial_config(
        {**trial, "method": "frozen_ln", "epochs": 1, "batch_size": 32, "eval_split": "test"},
        max_steps_per_epoch=2,
    )
    assert cfg.corruptions == ("contrast", "impulse_noise") and cfg.severities == (1, 5)
    final = run_training(cfg, checkpoint_dir=tmp_path)
    names = [f"{c}_s{s}" for c in ("contrast", "impulse_noise") for s in (1, 5)]
    assert sorted(
        k for k in final if k.startswith("test_accuracy_") and k != "test_accuracy_corruption_mean"
    ) == [f"test_accuracy_{name}" for name in sorted(names)]
    mean = sum(final[f"test_accuracy_{name}"] for name in names) / 4
    assert final["test_accuracy_corruption_mean"] == pytest.approx(mean)


def test_corruption_options_on_a_dataset_without_corruption_sets_fail_loudly(tmp_path):
    cfg = TrainConfig(dataset="digits", model="vit_lite_tiny", severities=(2,), epochs=1)
    with pytest.raises(ValueError, match="no corruption eval sets"):
        run_training(cfg, checkpoint_dir=tmp_path)
