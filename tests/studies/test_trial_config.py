"""The trial config contract (studies.trial_config): the forms a seed batch takes on its way through a
trial, and what a trial config without a checkpoint interval means."""

from __future__ import annotations

from studies.trial_config import (
    DRIVER_ONLY_KEYS,
    ORCHESTRATION_KEYS,
    Key,
    checkpoint_every_s_of,
    one_seed_config,
    seed_fields,
    trial_seeds,
)


def test_a_batch_of_several_seeds_carries_them_all_and_its_first_as_the_seed():
    assert seed_fields([3, 4]) == {Key.SEED: 3, Key.SEEDS: [3, 4]}
    assert trial_seeds(seed_fields([3, 4])) == [3, 4]


def test_a_batch_of_one_seed_is_a_plain_single_seed_trial():
    assert seed_fields([5]) == {Key.SEED: 5}
    assert trial_seeds({Key.SEED: 5}) == [5]


def test_one_seed_of_a_batch_is_configured_as_its_single_seed_trial_would_be():
    batch = {Key.METHOD: "dyt", Key.TRIAL_KEY: "s1/final/dyt/seeds3+4", **seed_fields([3, 4])}
    batch[Key.SEED_TRIAL_KEYS] = {3: "s1/final/dyt/seed3", 4: "s1/final/dyt/seed4"}
    assert one_seed_config(batch, 4, "s1/final/dyt/seed4") == {
        Key.METHOD: "dyt",
        Key.TRIAL_KEY: "s1/final/dyt/seed4",
        Key.SEED: 4,
    }
    assert one_seed_config(batch, 4)[Key.TRIAL_KEY] == "s1/final/dyt/seeds3+4"  # no key given: kept


def test_a_config_from_before_checkpoint_intervals_checkpoints_every_epoch():
    assert checkpoint_every_s_of({}) == 0.0
    assert checkpoint_every_s_of({Key.CHECKPOINT_EVERY_S: 30}) == 30.0


def test_the_seed_batch_keys_are_orchestration_and_the_bookkeeping_keys_are_the_drivers_alone():
    assert {Key.SEEDS, Key.SEED_TRIAL_KEYS, Key.TRIAL_KEY} <= ORCHESTRATION_KEYS
    assert not set(DRIVER_ONLY_KEYS) & ORCHESTRATION_KEYS
