"""Trial keys name a trial the same way after every restart, so DB and MLflow writes are idempotent."""

import pytest

from workers.driver.trial_keys import flatten_trial_config, trial_key_for


def test_final_trials_are_keyed_by_method_and_seed_not_by_tunes_random_id():
    config = {"study_id": "s1", "phase": "final", "method": "dyt", "seed": 3}
    assert trial_key_for(config, "abc_00001") == trial_key_for(config, "zzz_00009") == "s1/final/dyt/seed3"


def test_grid_trials_include_their_grid_point():
    config = {"study_id": "s1", "phase": "grid", "method": "frozen_ln", "seed": 0, "group": "skip_scale=0.5"}
    assert trial_key_for(config, None) == "s1/grid/frozen_ln/skip_scale=0.5/seed0"


def test_tuning_trials_use_tunes_trial_id_and_require_it():
    config = {"study_id": "s1", "phase": "tune", "method": "autonorm_s", "seed": 0}
    assert trial_key_for(config, "a1b2_00003") == "s1/tune/autonorm_s/a1b2_00003"
    with pytest.raises(ValueError, match="trial id"):
        trial_key_for(config, None)


def test_a_variant_is_lifted_to_the_top_of_the_config_and_wins_over_base_keys():
    config = {"study_id": "s1", "phase": "final", "seed": -1, "variant": {"method": "dyt", "seed": 4}}
    assert flatten_trial_config(config) == {"study_id": "s1", "phase": "final", "seed": 4, "method": "dyt"}
