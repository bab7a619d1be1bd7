"""studies.stats.power: the minimum detectable effect (power identity, normal limit, a simulation), the seeds an
effect or an equivalence needs, and whether a design can decide before it runs."""

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
    seeds_for_power,
    t_test_power,
)
from studies.stats.power import design_feasibility
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


def _tost_seeds_directly(sd: float, margin: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """TOST under a null effect, written out: each one-sided test at alpha / 2 rejects when the t statistic
    against its bound exceeds t_crit; both reject with probability at least 2 P(one rejects) - 1."""
    n = 2
    while True:
        t_crit = stats.t.ppf(1 - alpha / 2, n - 1)
        one_side = stats.nct.sf(t_crit, n - 1, margin / (sd / math.sqrt(n)))
        if 2 * one_side - 1 >= power:
            return n
        n += 1


def test_equivalence_under_a_null_effect_needs_the_tost_seeds_of_a_direct_computation() -> None:
    # the post-freeze ablation's spreads at ±1 accuracy point: the 53-72 seeds its cpu run lacked
    for sd, seeds in ((0.025760, 72), (0.022013, 53)):
        assert seeds_for_equivalence(0.0, sd, 0.01) == _tost_seeds_directly(sd, 0.01) == seeds
    # the normal approximation (z_.975 + z_.9)^2 (sd / margin)^2 is a little below the t-based count
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.9)
    assert 0 < 72 - (z * 0.025760 / 0.01) ** 2 < 3


def test_a_null_effect_sized_design_lands_inside_the_margin_four_times_in_five() -> None:
    sd, margin = 0.004, 0.003
    n = seeds_for_equivalence(0.0, sd, margin)
    assert n is not None
    d = np.random.default_rng(2).normal(0.0, sd, size=(20_000, n))
    half_width = stats.t.ppf(0.975, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    inside = (d.mean(axis=1) - half_width >= -margin) & (d.mean(axis=1) + half_width <= margin)
    assert 0.8 <= inside.mean() < 0.86  # the bound is conservative, and tight at 80 %


def test_stale_equivalence_rows_are_resized_by_the_current_equivalence_count() -> None:
    # The committed California (244) and MNIST (20) rows predate equivalence sizing: 244 and 20 are the
    # seeds to *detect* the paper's effect. With those reports' spreads and margins the answers are 4 and 8.
    california_sd, california_margin, california_effect = 0.0072185, 0.02749, -0.0013
    mnist_sd, mnist_margin, mnist_effect = 0.0054248, 0.01, 0.0036
    assert seeds_for_power(california_effect, california_sd) == 244
    assert seeds_for_equivalence(california_effect, california_sd, california_margin) == 4
    assert seeds_for_power(mnist_effect, mnist_sd) == 20
    assert seeds_for_equivalence(mnist_effect, mnist_sd, mnist_margin) == 8


def test_five_seeds_cannot_decide_the_post_freeze_ablation_and_the_needed_count_can() -> None:
    sd = 0.025760  # expected − sample gate, measured on digits over 5 seeds
    five = design_feasibility(sd, 5, margin=0.01)
    assert not five.can_decide and five.power is not None and five.power < 0.05
    assert five.seeds_needed == seeds_for_equivalence(0.0, sd, 0.01) == 72
    assert (
        five.reason.startswith("cannot decide: 5 seeds give under 1 % power")
        and "needs 72 seeds" in five.reason
    )
    enough = design_feasibility(sd, 72, margin=0.01)
    assert enough.can_decide and enough.reason.startswith("can decide")
    assert not design_feasibility(sd, 71, margin=0.01).can_decide
    # both gates must be shown equal for the ordering to be supported: each needs more power, so more seeds
    both = design_feasibility(sd, 72, margin=0.01, findings_needed=2)
    assert not both.can_decide and both.seeds_needed == 87
    assert design_feasibility(sd, 87, margin=0.01, findings_needed=2).power >= 0.8


def test_a_directional_design_is_sized_at_the_bonferroni_level_of_its_holm_family() -> None:
    sd, effect = 0.022, 0.0087
    single = design_feasibility(sd, 3, effect=effect)
    assert single.seeds_needed == seeds_for_power(effect, sd)
    family = design_feasibility(sd, 3, effect=effect, comparisons=9, findings_needed=3)
    n = family.seeds_needed
    assert n is not None and n > single.seeds_needed
    per_point = [t_test_power(effect / (sd / math.sqrt(k)), k - 1, 0.05 / 9) for k in (n - 1, n)]
    assert per_point[0] ** 3 < 0.8 <= per_point[1] ** 3
    assert family.power == pytest.approx(t_test_power(effect / (sd / math.sqrt(3)), 2, 0.05 / 9) ** 3)


def test_a_design_without_a_known_spread_or_a_reachable_margin_cannot_be_sized() -> None:
    unknown = design_feasibility(None, 5, margin=0.01)
    assert not unknown.can_decide and unknown.seeds_needed is None
    assert unknown.reason.startswith("cannot be sized: no spread")
    past = design_feasibility(0.01, 5, effect=0.012, margin=0.01)
    assert past.seeds_needed is None and "no number of seeds shows equivalence" in past.reason
    with pytest.raises(ValueError, match="effect of interest"):
        design_feasibility(0.01, 5)
