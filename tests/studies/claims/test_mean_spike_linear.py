"""`mean_spike` with `linear`: the one-matrix ReLU spike must grow LINEARLY with depth (exponent ~1, a
straight line with high R² and a positive slope) while two matrices and tanh grow like a random walk."""

from __future__ import annotations

import math

import pytest

from studies.claims import CONTRADICTED, SUPPORTED, LinearGrowth, MeanSpikeCheck, parse_check
from studies.claims.verdicts import NOT_TESTED
from tests.studies.claims.synthetic import data, law, trial

DEPTH = 16
ROWS = (("one_matrix", "relu"), ("two_matrix", "relu"), ("one_matrix", "tanh"))
CHECK = MeanSpikeCheck(linear=LinearGrowth())


def _study(drift, growth=None, seeds=range(5)):
    """drift[(branch, activation)](l): the mean the blocks added by depth l; growth: spike last − first."""
    growth = growth or {
        ("one_matrix", "relu"): 0.25,
        ("two_matrix", "relu"): 0.12,
        ("one_matrix", "tanh"): -0.1,
    }
    trials = []
    for row, (branch, activation) in enumerate(ROWS):
        for seed in seeds:
            wobble = 0.01 * ((seed * (row + 2)) % 5)
            init = {
                "init_mean_spike_first": 0.5,
                "init_mean_spike_last": 0.5 + growth[(branch, activation)] + wobble,
            }
            if drift is not None:
                init |= law("init_mean_drift", range(1, DEPTH + 1), drift[(branch, activation)], seed)
                init["init_mean_drift_0"] = 0.0
            trials.append(trial({"branch": branch, "activation": activation}, seed, init))
    return data(trials)


LINEAR_ONE_MATRIX = {
    ("one_matrix", "relu"): lambda d: 0.4 * d,
    ("two_matrix", "relu"): lambda d: 0.3 * math.sqrt(d),
    ("one_matrix", "tanh"): lambda d: 0.05 * math.sqrt(d),
}


def test_linear_growth_for_one_matrix_relu_only_supports_the_claim():
    result = CHECK.evaluate(_study(LINEAR_ONE_MATRIX))
    assert result.verdict == SUPPORTED
    labels = [f.label for f in result.findings]
    assert len(labels) == 3 + 3 + 2  # growth vs controls; exponent, R², slope; one exponent per control
    exponent = result.findings[3]
    assert exponent.measured == pytest.approx(1.0, abs=0.05) and exponent.expected == "in [0.75, 1.25]"
    r2 = result.findings[4]
    assert r2.measured > 0.99 and r2.expected == "> 0.98"
    controls = result.findings[6:]
    assert all(f.expected == "outside [0.75, 1.25]" and f.measured < 0.6 for f in controls)


def test_a_control_that_also_grows_linearly_contradicts_the_claim():
    drift = dict(LINEAR_ONE_MATRIX) | {("two_matrix", "relu"): lambda d: 0.3 * d}
    result = CHECK.evaluate(_study(drift))
    assert result.verdict == CONTRADICTED
    two_matrix = next(f for f in result.findings if "two_matrix" in f.label and "not linear" in f.label)
    assert two_matrix.verdict == CONTRADICTED


def test_a_spike_that_grows_like_a_random_walk_is_not_linear():
    drift = dict(LINEAR_ONE_MATRIX) | {("one_matrix", "relu"): lambda d: 0.4 * math.sqrt(d)}
    result = CHECK.evaluate(_study(drift))
    assert result.verdict == CONTRADICTED
    assert result.findings[3].verdict == CONTRADICTED  # exponent 0.5, outside [0.75, 1.25]


def test_a_spike_that_saturates_fails_the_straight_line():
    drift = dict(LINEAR_ONE_MATRIX) | {("one_matrix", "relu"): lambda d: 3.0 * (1 - math.exp(-d / 3))}
    result = CHECK.evaluate(_study(drift))
    assert result.verdict == CONTRADICTED
    assert result.findings[4].verdict == CONTRADICTED  # R² well below 0.98


def test_trials_without_the_per_depth_mean_leave_the_linear_part_not_tested():
    result = CHECK.evaluate(_study(None))
    assert result.verdict == NOT_TESTED
    assert {f.verdict for f in result.findings[3:]} == {NOT_TESTED}
    assert result.findings[0].verdict == SUPPORTED  # the growth part is still judged


def test_a_check_without_linear_parameters_says_the_linear_growth_was_not_tested():
    result = MeanSpikeCheck().evaluate(_study(LINEAR_ONE_MATRIX))
    assert result.verdict == SUPPORTED and len(result.findings) == 3
    assert result.notes == (
        "the linear growth with depth is not tested (the check has no `linear` parameters)",
    )


def test_the_linear_parameters_parse_from_a_claims_mapping():
    check = parse_check({"type": "mean_spike", "linear": {"tolerance": 0.25, "min_r2": 0.98}})
    assert isinstance(check, MeanSpikeCheck) and check.linear == LinearGrowth(tolerance=0.25, min_r2=0.98)
    with pytest.raises(ValueError):
        parse_check({"type": "mean_spike", "linear": {"min_r2": 1.5}})
