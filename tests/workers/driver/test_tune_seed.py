"""The tune phase runs on the spec's tune seed, never on a final seed (unit test of workers.driver.study)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from studies.spec import StudySpec
from tests.factories import digits_spec
from workers.driver import study as driver_study
from workers.trials.plan import TrialPlan

PLAN = TrialPlan(cpu=1.0, gpu=0.0, seeds_per_trial=1, gpu_reason="test")

SPEC = digits_spec(
    name="tune",
    methods=["frozen_ln"],
    search={"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}},
    seeds=[0, 1, 2],
    epochs=2,
)


class Stop(Exception):
    """Ends _run_compare where the Tuner would start: the captured arguments are what is tested."""


@pytest.fixture
def captured(monkeypatch):
    seen: dict = {}

    def tuner(path, trainable, **kwargs):
        seen.update(kwargs)
        raise Stop

    real_sampler = optuna.samplers.TPESampler

    def sampler(**kwargs):
        seen["sampler_seed"] = kwargs.get("seed")
        return real_sampler(**kwargs)

    monkeypatch.setattr(driver_study, "_tuner", tuner)
    monkeypatch.setattr(driver_study, "_run_config", lambda *args, **kwargs: None)
    monkeypatch.setattr(optuna.samplers, "TPESampler", sampler)
    return seen


def _tune(spec: StudySpec) -> None:
    ctx = driver_study.DriverContext(
        engine=None, database_url="sqlite://", mlflow_tracking_uri="http://mlflow.test", results_dir=Path(".")
    )
    metric = driver_study.MetricInfo(name="accuracy", higher_is_better=True)
    with pytest.raises(Stop):
        driver_study._run_compare(spec, PLAN, ctx, {}, metric=metric, client=None, parent=None)


@pytest.mark.parametrize("tune_seeds, expected", [(None, 3), ([50, 51], 50)])
def test_tuning_trials_and_the_sampler_use_the_first_tune_seed(captured, tune_seeds, expected):
    spec = StudySpec.model_validate({**SPEC, **({"tune_seeds": tune_seeds} if tune_seeds else {})})
    _tune(spec)
    tuning = [
        captured["tune_config"].search_alg.suggest(f"t{i}") for i in range(spec.num_samples_for("frozen_ln"))
    ]
    assert all(t["phase"] == "tune" and t["seed"] == expected for t in tuning)
    assert expected not in spec.seeds
    assert captured["sampler_seed"] == expected
