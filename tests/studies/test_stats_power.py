"""studies.stats.minimum_detectable_effect: power identity, normal limit and a simulation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from studies.stats import (
    compare,
    equivalence_power,
    minimum_detectable_effect,
    seeds_for_equivalence,
    t_test_power,
)
from studies.tables import TrialRecord, build_results_table


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


def test_power_stays_finite_where_scipys_lower_tail_cdf_is_nan() -> None:
    # scipy's nct.cdf(-t_crit, df=1, nc=8) is NaN; the lower tail is read as nct.sf(t_crit, df, -nc).
    t_crit = stats.t.ppf(0.975, 1.0)
    power = t_test_power(8.0, 1.0, 0.05)
    assert math.isfinite(power) and 0.05 < power < 1.0
    assert power == pytest.approx(stats.nct.sf(t_crit, 1.0, 8.0), abs=1e-6)  # the far tail is negligible
    assert t_test_power(-8.0, 1.0, 0.05) == pytest.approx(power)  # power is symmetric in the effect
    mde = minimum_detectable_effect(1.0, 1.0)
    assert mde is not None and t_test_power(mde, 1.0, 0.05) == pytest.approx(0.8, abs=1e-8)


def test_the_mde_is_none_when_scipy_cannot_compute_the_power(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats.nct, "sf", lambda *args: float("nan"))
    assert math.isnan(t_test_power(3.0, 4.0, 0.05))
    assert minimum_detectable_effect(0.5, 4.0) is None


def test_a_welch_comparison_with_about_one_degree_of_freedom_builds_a_table_with_a_finite_mde() -> None:
    reference = [41.2, 40.8, 41.5, 41.0]
    method = [44.0, 47.5]
    records = [TrialRecord("s1", "frozen_ln", seed, v, "succeeded") for seed, v in enumerate(reference)]
    records += [
        TrialRecord("s1", "dyt", seed, v, "succeeded") for seed, v in zip((10, 11), method, strict=True)
    ]
    table = build_results_table(records, dataset="ptb_lm", metric="perplexity", higher_is_better=False)

    row = next(r for r in table.rows if r.method == "dyt")
    assert row.test.startswith("Welch")
    variances = [np.var(reference, ddof=1) / 4, np.var(method, ddof=1) / 2]
    se = math.sqrt(sum(variances))
    df = sum(variances) ** 2 / (variances[0] ** 2 / 3 + variances[1] ** 2 / 1)
    assert df == pytest.approx(1.0, abs=0.1)  # where scipy's lower-tail nct.cdf breaks down
    assert row.mde_80 is not None and math.isfinite(row.mde_80)
    assert t_test_power(row.mde_80 / se, df, 0.05) == pytest.approx(0.8, abs=1e-6)
    json.dumps(table.to_json(), allow_nan=False)  # the API can serve it


def test_equivalence_power_matches_how_often_the_interval_lands_inside_the_margin() -> None:
    n, sd, margin, effect, sims = 6, 0.004, 0.01, 0.0036, 40_000
    d = np.random.default_rng(1).normal(effect, sd, size=(sims, n))
    half_width = stats.t.ppf(0.975, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    inside = (d.mean(axis=1) - half_width >= -margin) & (d.mean(axis=1) + half_width <= margin)
    assert equivalence_power(effect, sd, n, margin) == pytest.approx(inside.mean(), abs=0.01)


def test_seeds_for_equivalence_is_the_first_count_reaching_eighty_percent() -> None:
    n = seeds_for_equivalence(0.0036, 0.004, 0.01)
    assert n is not None
    assert equivalence_power(0.0036, 0.004, n, 0.01) >= 0.8 > equivalence_power(0.0036, 0.004, n - 1, 0.01)
    # an effect closer to the margin needs more seeds; one at or past the margin can never be shown equal
    assert seeds_for_equivalence(0.008, 0.004, 0.01) > n
    assert seeds_for_equivalence(0.01, 0.004, 0.01) is None
    assert seeds_for_equivalence(-0.012, 0.004, 0.01) is None
