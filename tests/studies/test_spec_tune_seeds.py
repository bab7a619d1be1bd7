"""The tune phase picks configs on seeds of its own, so the final phase never reports the seeds its
configs were chosen on."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.spec import StudySpec

BASE = {"name": "seeds", "dataset": "digits", "methods": ["frozen_ln", "dyt"]}


def spec(**changes) -> StudySpec:
    return StudySpec.model_validate({**BASE, **changes})


def errors(**changes) -> dict[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        StudySpec.model_validate({**BASE, **changes})
    return {tuple(e["loc"]): e["msg"] for e in caught.value.errors()}


def test_tune_seeds_default_to_one_seed_after_the_largest_final_seed():
    assert spec().tune_seeds == [3]  # seeds default to [0, 1, 2]
    assert spec(seeds=[7, 2, 40]).tune_seeds == [41]
    assert spec(seeds=[7, 2, 40]).tune_seed == 41


def test_at_the_top_of_the_seed_range_the_default_is_the_smallest_free_seed():
    assert spec(seeds=[0, 2**32 - 1]).tune_seeds == [1]


def test_given_tune_seeds_are_kept_and_the_first_seeds_every_tuning_trial():
    s = spec(seeds=[0, 1], tune_seeds=[100, 101])
    assert s.tune_seeds == [100, 101] and s.tune_seed == 100


def test_tune_seeds_that_are_also_final_seeds_are_refused_at_tune_seeds():
    message = errors(seeds=[0, 1, 2], tune_seeds=[2, 9])[("tune_seeds",)]
    assert "[2] are also final seeds" in message and "tune_seeds: [3]" in message


@pytest.mark.parametrize(
    "tune_seeds, fragment",
    [([], "at least 1"), ([5, 5], "unique"), ([-1], "[0, 2**32)"), ([2**32], "[0, 2**32)")],
)
def test_tune_seeds_are_unique_seeds_in_range(tune_seeds, fragment):
    assert fragment in errors(tune_seeds=tune_seeds)[("tune_seeds",)]


def test_the_default_is_stored_so_a_stored_spec_reads_back_with_the_same_tune_seeds():
    s = spec(seeds=[4, 5])
    dumped = s.model_dump(mode="json")
    assert dumped["tune_seeds"] == [6]
    assert StudySpec.model_validate(dumped) == s


def test_invalid_final_seeds_are_reported_once_at_seeds():
    problems = errors(seeds=[1, 1])
    assert list(problems) == [("seeds",)]
