"""studies.stats.minimum_detectable_effect: power identity, normal limit and a simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from studies.stats import compare, minimum_detectable_effect, t_test_power


def test_power_at_the_minimum_detectable_effect_is_eighty_percent() -> None:
    se, df = 0.004, 7
    mde = minimum_detectable_effect(se, df)
    t_crit = stats.t.ppf(0.975, df)
    nc = mde / se
    power = stats.nct.sf(t_crit, df, nc) + stats.nct.cdf(-t_crit, df, nc)
    assert power == pytest.approx(0.8, abs=1e-8)
    assert t_test_power(0.9 * nc, df, 0.05) < 0.8


def test_large_samples_approach_the_normal_formula() -> None:
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)  # 2.80
    assert minimum_detectable_effect(1.0, 10_000) == pytest.approx(z, rel=1e-3)


def test_fewer_seeds_mean_a_larger_detectable_effect() -> None:
    sd = 0.01
    mdes = [minimum_detectable_effect(sd / math.sqrt(n), n - 1) for n in (3, 5, 10, 20)]
    assert mdes == sorted(mdes, reverse=True)


def test_a_paired_t_test_at_the_mde_rejects_about_eighty_percent_of_the_time() -> None:
    n, sd, sims = 6, 1.0, 20_000
    mde = minimum_detectable_effect(sd / math.sqrt(n), n - 1)
    d = np.random.default_rng(0).normal(mde, sd, size=(sims, n))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    rejected = np.abs(t) > stats.t.ppf(0.975, n - 1)
    assert rejected.mean() == pytest.approx(0.8, abs=0.015)


def test_compare_reports_the_mde_from_the_spread_of_the_differences_and_the_confidence_level() -> None:
    x = [0.812, 0.826, 0.801, 0.819, 0.822]
    y = [0.805, 0.811, 0.803, 0.808, 0.809]
    d = np.subtract(x, y)
    c = compare(x, y, confidence=0.9)
    expected = minimum_detectable_effect(d.std(ddof=1) / math.sqrt(5), 4, alpha=0.1)
    assert c.mde_80 == pytest.approx(expected)


def test_undefined_inputs_give_none() -> None:
    assert minimum_detectable_effect(0.0, 4) is None
    assert minimum_detectable_effect(0.1, 0) is None
    assert minimum_detectable_effect(float("nan"), 4) is None
