"""The spread a plan sizes seeds by: an earlier study's paired differences, named, where the store has
one; else a stated prior for accuracy, and none for metrics in a dataset's own units."""

from __future__ import annotations

import statistics

import pytest

from studies.planning.history import History, PairedValues
from studies.planning.spread import PRIOR_SD, prior_spread, spread_for, stored_spread

REFERENCE = [0.95, 0.94, 0.96, 0.95]
DYT = [0.93, 0.94, 0.93, 0.95]  # differences -0.02, 0, -0.03, 0
FILM = [0.95, 0.95, 0.96, 0.97]  # differences 0, 0.01, 0, 0.02


def _paired(study: str, **values: list[float]) -> PairedValues:
    return PairedValues(study, "frozen_ln", {m: dict(enumerate(v)) for m, v in values.items()})


def _sd(values: list[float]) -> float:
    return statistics.stdev(v - r for v, r in zip(values, REFERENCE, strict=True))


def test_the_newest_study_with_paired_seeds_gives_the_spread_and_is_named():
    history = History(
        paired=(
            _paired("pilot (abc)", frozen_ln=REFERENCE, dyt=DYT),
            _paired("old (def)", frozen_ln=REFERENCE, film=FILM),
        )
    )
    spread = stored_spread(history, ["frozen_ln", "dyt"])
    assert spread.source == "study" and spread.study == "pilot (abc)"
    assert spread.sd == pytest.approx(_sd(DYT))
    assert spread.comparisons == 1 and spread.seeds == 4
    assert "pilot (abc)" in spread.basis and "dyt - frozen_ln" in spread.basis


def test_comparisons_of_the_planned_methods_are_preferred_and_several_are_pooled():
    history = History(paired=(_paired("pilot (abc)", frozen_ln=REFERENCE, dyt=DYT, film=FILM),))
    assert stored_spread(history, ["frozen_ln", "film"]).sd == pytest.approx(_sd(FILM))
    pooled = stored_spread(history, ["frozen_ln", "autonorm_s"])  # neither was run: both are pooled
    assert pooled.comparisons == 2
    assert pooled.sd == pytest.approx(((_sd(DYT) ** 2 + _sd(FILM) ** 2) / 2) ** 0.5)


def test_a_study_without_two_paired_seeds_is_skipped():
    single = _paired("single (abc)", frozen_ln=REFERENCE[:1], dyt=DYT[:1])
    assert stored_spread(History(paired=(single,)), ["frozen_ln", "dyt"]) is None


def test_without_a_stored_study_accuracy_gets_a_stated_prior_and_other_metrics_none():
    accuracy = spread_for(History(), ["frozen_ln", "dyt"], "accuracy")
    assert (
        accuracy.source == "prior"
        and accuracy.sd == PRIOR_SD
        and "prior, not a measurement" in accuracy.basis
    )
    rmse = prior_spread("rmse")
    assert rmse.sd is None and rmse.source == "none" and "pilot study" in rmse.basis
