"""Trial keys name a trial the same way after every restart, so DB and MLflow writes are idempotent."""

import pytest

from studies.trial_config import trial_seeds
from workers.trials.keys import flatten_trial_config, seed_trial_keys, trial_key_for


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


def test_a_seed_batched_trial_gives_each_seed_the_key_its_single_seed_trial_would_have():
    batched = {"study_id": "s1", "phase": "final", "method": "dyt", "seed": 3, "seeds": [3, 4]}
    assert seed_trial_keys(batched, "abc_00001") == {3: "s1/final/dyt/seed3", 4: "s1/final/dyt/seed4"}
    assert trial_key_for(batched, "abc_00001") == "s1/final/dyt/seeds3+4"
    single = {"study_id": "s1", "phase": "final", "method": "dyt", "seed": 3}
    assert seed_trial_keys(single, None) == {3: trial_key_for(single, None)}


def test_grid_seed_batches_keep_their_grid_point_in_every_seed_key():
    config = {"study_id": "s1", "phase": "grid", "method": "dyt", "seed": 0, "seeds": [0, 1], "group": "g=1"}
    assert trial_seeds(config) == [0, 1]
    assert seed_trial_keys(config, None) == {0: "s1/grid/dyt/g=1/seed0", 1: "s1/grid/dyt/g=1/seed1"}
