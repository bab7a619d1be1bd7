"""Every trial config of a study comes from its spec (workers.driver.trial_configs), and every one of them
is a config the trial can train: its training part is TrainConfig's, the rest the contract's."""

from __future__ import annotations

import pytest

from studies.spec import StudySpec
from studies.trial_config import DRIVER_ONLY_KEYS, FINAL_PHASE, GRID_PHASE, TUNE_PHASE, Key
from workers.driver.trial_configs import StudyTrialConfigs
from workers.training.config import TrainConfig
from workers.trials.keys import flatten_trial_config

COMPARE = {
    "name": "configs",
    "dataset": "digits_c",
    "model": "vit_lite_tiny",
    "methods": ["frozen_ln", "autonorm_s"],
    "method_search": {"autonorm_s": {"t_freeze": {"type": "int", "low": 1, "high": 2}}},
    "search": {"width_expansion": {"type": "choice", "values": [1.0, 2.0]}},
    "seeds": [0, 1, 2],
    "data": {"severities": [2]},
    "budget": {"epochs": 3, "batch_size": 32},
    "resources": {"cpu": 2},
}
WIRING = {
    "study_id": "s1",
    "checkpoint_every_s": 30.0,
    "mlflow_tracking_uri": "http://mlflow.test",
    "mlflow_experiment_id": "1",
    "mlflow_parent_run_id": "p1",
    "mlflow_spool_dir": "/data/mlflow_spool",
}


def _trained(base: dict, part: dict) -> TrainConfig:
    """What the trial process trains from Tune's config: flattened, without the driver's bookkeeping."""
    flat = flatten_trial_config({**base, **part})
    return TrainConfig.from_trial_config({k: v for k, v in flat.items() if k not in DRIVER_ONLY_KEYS})


def test_the_base_is_the_specs_budget_and_data_with_the_drivers_wiring():
    configs = StudyTrialConfigs(StudySpec.model_validate(COMPARE))
    base = configs.base(**WIRING)
    assert base[Key.STUDY_ID] == "s1" and base[Key.MLFLOW_SPOOL_DIR] == "/data/mlflow_spool"
    assert base[Key.CHECKPOINT_EVERY_S] == 30.0 and base[Key.NUM_THREADS] == 2
    assert (base[Key.EPOCHS], base[Key.BATCH_SIZE], base[Key.SEVERITIES]) == (3, 32, [2])


def test_tuning_final_and_probe_trials_are_configs_the_trial_trains():
    configs = StudyTrialConfigs(StudySpec.model_validate(COMPARE))
    base = configs.base(**WIRING)
    tuning = _trained(base, {**configs.tuning, Key.METHOD: "autonorm_s", Key.KNOBS: {"t_freeze": 2}})
    # The tune seed is one the final seeds do not use: the first after them.
    assert (tuning.seed, tuning.eval_split, tuning.t_freeze) == (3, "val", 2)
    finals = configs.finals(2)
    assert [f[Key.PHASE] for f in finals] == [FINAL_PHASE] * 2 and configs.tuning[Key.PHASE] == TUNE_PHASE
    assert [f.get(Key.SEEDS) for f in finals] == [[0, 1], None]  # 3 seeds in batches of at most 2
    assert _trained(base, {**finals[1], Key.METHOD: "frozen_ln", Key.KNOBS: {}}).eval_split == "test"
    probes = configs.probes(3)
    assert [p[Key.METHOD] for p in probes] == ["frozen_ln", "autonorm_s"]
    assert all(p[Key.KNOBS] == {"width_expansion": 2.0} and p[Key.SEEDS] == [0, 1, 2] for p in probes)
    assert _trained(base, probes[0]).knobs == {"width_expansion": 2.0}


@pytest.mark.parametrize("scheduler, may_stop_early", [({"type": "none"}, False), ({"type": "asha"}, True)])
def test_only_an_asha_study_lets_its_tuning_trials_stop_early(scheduler, may_stop_early):
    configs = StudyTrialConfigs(StudySpec.model_validate({**COMPARE, "scheduler": scheduler}))
    assert configs.tuned_methods == ["frozen_ln", "autonorm_s"]
    assert configs.tuning[Key.MAY_STOP_EARLY] is may_stop_early
    assert all(f[Key.MAY_STOP_EARLY] is False for f in configs.finals(1))


def test_a_grid_study_runs_every_method_point_and_seed_batch_to_its_end():
    grid = {
        **COMPARE,
        "kind": "grid",
        "methods": ["frozen_ln"],
        "method_search": {},
        "search": {"lr": {"type": "grid", "values": [1e-3, 2e-3]}},
    }
    configs = StudyTrialConfigs(StudySpec.model_validate(grid))
    variants = configs.variants(2)
    assert len(variants) == 2 * 2  # 2 grid points x 2 seed batches
    assert {v[Key.GROUP] for v in variants} == {"lr=0.001", "lr=0.002"}
    shared = {**configs.base(**WIRING), **StudyTrialConfigs.variant_fields(GRID_PHASE)}
    assert shared[Key.MAY_STOP_EARLY] is False
    trained = _trained(shared, {Key.VARIANT: variants[0]})
    assert (trained.eval_split, trained.lr) == ("test", 1e-3)
