"""The sequential-seeds benchmark's simulation: spreads read from the reports, its designs on a small count,
and the section it writes into BENCHMARKS.md."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmarks import bench_sequential as bench
from benchmarks.bench_sequential import Arm, Scenario

# One comparison whose true gain (+20 points) dwarfs the rotten_tomatoes_vader spread (sd 0.0053): every
# design must find it, and the sequential ones must stop early.
OVERWHELMING = Scenario(
    name="overwhelming",
    report="sst2_autonorm_s_beats_frozen_ln.json",
    test="superiority",
    arms=(Arm("autonorm_s", 0.20, "far beyond any spread, for the test"),),
    higher_is_better=True,
)


@pytest.fixture(scope="module")
def overwhelming() -> bench.ScenarioResult:
    return bench.evaluate(OVERWHELMING, studies=60, adastop_seconds=60.0, adastop_max=2)


def test_the_spread_is_read_from_the_reports_per_seed_values():
    report = json.loads((bench.REPORTS / "california_housing_no_gain.json").read_text(encoding="utf-8"))
    (power,) = report["power"]
    spread = bench.measured_spread("california_housing_no_gain.json")
    seeds, sd = spread.paired["autonorm_s"]
    # The report's own power analysis stored the same seeds and sd of the paired differences.
    assert seeds == power["seeds_run"] and sd == pytest.approx(power["sd_difference"], rel=1e-9)
    assert spread.reference == "frozen_ln" and spread.metric == "test_rmse"
    assert spread.study_id == report["study_id"]


def test_the_noise_model_reproduces_the_measured_paired_and_reference_spreads():
    spread = bench.measured_spread("cifar10_autonorm_s_beats_frozen_ln.json")
    methods = [spread.reference, "autonorm_s", "autonorm", "random_selector", "adanorm"]
    for tails in ("gaussian", "t3"):
        model = bench.noise_model(spread, methods, tails)
        noise = bench.simulate(model, methods, 10, 4000, np.random.default_rng(3))
        for j, method in enumerate(methods[1:], start=1):
            differences = (noise[:, j] - noise[:, 0]).ravel()
            assert differences.std() == pytest.approx(spread.paired[method][1], rel=0.06), (tails, method)
        reference_sd = max(spread.reference_sd, model.noise_sd[spread.reference])
        assert noise[:, 0].std() == pytest.approx(reference_sd, rel=0.06), tails


def test_holm_steps_down_and_stops_at_the_first_comparison_it_cannot_reject():
    p = np.array([[0.01, 0.04, 0.03], [0.01, 0.02, 0.04], [0.03, 0.02, 0.5]])
    assert bench.holm(p, 0.05).tolist() == [
        [True, False, False],  # 0.03 > 0.05 / 2 stops the step-down before 0.04
        [True, True, True],
        [False, False, False],  # 0.02 > 0.05 / 3
    ]


def test_an_overwhelming_effect_stops_the_sequential_designs_early_and_every_design_finds_it(overwhelming):
    rows = {row.design: row for row in overwhelming.rows}
    fixed = rows["fixed, 10 seeds, paired t + Holm"]
    obf, pocock = rows["NormLab, O'Brien-Fleming"], rows["NormLab, Pocock"]
    assert fixed.power == {"autonorm_s": 1.0} and fixed.trials_effect == 1.0
    assert obf.power == {"autonorm_s": 1.0} and pocock.power == {"autonorm_s": 1.0}
    # Pocock's first boundary is low enough to stop every study at the first look (3 of 10 seeds);
    # O'Brien-Fleming's asks a t of about 54 on 2 degrees of freedom there, which a t near 65 passes only in
    # some studies, and stops the rest at the second look (5 of 10).
    assert pocock.trials_effect == pytest.approx(0.3)
    assert 0.3 < obf.trials_effect <= 0.5
    for row in (obf, pocock, fixed):
        assert row.studies == 60 and row.fwer <= 0.2  # loose: 60 studies only
    # Under no difference the futility bound stops most studies before max_seeds.
    assert obf.trials_null < 1.0 and pocock.trials_null < 1.0


def test_adastop_runs_on_the_same_data_when_installed_and_is_named_missing_otherwise(overwhelming):
    adastop = [row for row in overwhelming.rows if row.kind == "adastop"]
    if not bench.adastop_available():
        assert adastop == [] and "AdaStop was not installed" in overwhelming.adastop_note
        return
    assert [row.design for row in adastop] == [
        "AdaStop, n=2, K=5",
        "AdaStop, n=5, K=2",
        "AdaStop, n=5, K=2, alpha 0.025",
    ]
    for row in adastop:
        assert row.studies == 2 and row.power == {"autonorm_s": 1.0}
    # n=2: at its first look no rejection is possible (6 permutations, level 0.01); at its second (36) only
    # where rounding puts the observed statistic above the largest permuted one, its exact tie; at its third
    # (6 of 10 seeds) for certain. n=5 rejects at its first look (5 of 10).
    assert 0.4 <= adastop[0].trials_effect <= 0.6
    assert adastop[1].trials_effect == pytest.approx(0.5)
    assert all(row.trials_null == 1.0 for row in adastop)  # beta 0: no early stop without a rejection


def test_without_adastop_the_section_says_so_and_keeps_normlabs_rows(monkeypatch):
    monkeypatch.setattr(bench, "adastop_available", lambda: False)
    result = bench.evaluate(OVERWHELMING, studies=20, adastop_seconds=0.0)
    assert [row.kind for row in result.rows] == [
        "sequential",
        "sequential",
        "fixed",
        "sequential",
        "sequential",
    ]
    text = bench.section([result], studies=20, adastop_seconds=0.0)
    assert "AdaStop was not installed" in text and "not installed" in text.split("\n\n")[1]


def test_equivalence_puts_the_null_at_the_margin_and_reads_adastops_equal_as_its_claim():
    scenario = next(s for s in bench.SCENARIOS if s.name == "california_housing")
    spread = bench.measured_spread(scenario.report)
    margin = scenario.margin(spread)
    assert margin == pytest.approx(0.05 * spread.reference_mean)  # the claim's relative margin
    # RMSE: worse is higher, so the null sits at +margin; the effect is the paper's -0.0013.
    assert scenario.truths(spread) == {"null": {"autonorm_s": margin}, "effect": {"autonorm_s": -0.0013}}
    assert scenario.design(spread, "pocock").margin == margin


def test_the_section_has_a_table_per_scenario_with_every_design_and_a_reading(overwhelming):
    text = bench.section([overwhelming], studies=60, adastop_seconds=0.0)
    assert text.startswith(bench.HEADING + "\n\n")
    assert "### overwhelming: superiority, 1 comparison with frozen_ln" in text
    assert "reports/sst2_autonorm_s_beats_frozen_ln.json" in text
    table = [line for line in text.splitlines() if line.startswith("| NormLab") or line.startswith("| fixed")]
    assert len(table) == 5
    obf = next(line for line in table if "O'Brien-Fleming" in line).split(" | ")
    assert obf[2] == "1.000" and obf[3] == f"{overwhelming.rows[0].trials_effect:.2f}x"  # power, seeds
    assert "### What holds and what does not" in text
    assert "aim of 0.7x is met everywhere" in text


def test_a_power_matched_row_asks_for_the_fixed_designs_power_and_reaches_it(overwhelming):
    fixed = next(row for row in overwhelming.rows if row.kind == "fixed")
    matched = [row for row in overwhelming.rows if "max_seeds" in row.design]
    assert [row.design for row in matched] == [
        "NormLab, O'Brien-Fleming, power 0.99, max_seeds 10 (power-matched)",
        "NormLab, Pocock, power 0.99, max_seeds 10 (power-matched)",
    ]
    assert all(
        row.power["autonorm_s"] >= fixed.power["autonorm_s"] - bench.MATCH_TOLERANCE for row in matched
    )


def test_a_design_that_cannot_reach_the_fixed_power_says_so_at_the_cap():
    scenario = next(s for s in bench.SCENARIOS if s.name == "cifar10")
    spread = bench.measured_spread(scenario.report)
    methods = scenario.methods(spread)
    fixed = bench.Row(
        "fixed", "fixed", 1, 0.0, 0.0, {"autonorm_s": 1.0, "random_selector": 1.0}, 1.0, None, 1, 1, 0
    )
    values = np.zeros((3, len(methods), bench.MATCH_MAX_SEEDS))  # no difference at all: no power anywhere
    design, reached = bench.power_matched(
        scenario.design(spread, "pocock"), values, methods, scenario, scenario.truths(spread), fixed
    )
    assert not reached and design.max_seeds == bench.MATCH_MAX_SEEDS and design.power == 0.99


def test_the_section_replaces_its_own_part_of_benchmarks_md_or_goes_before_the_kept_sections():
    kept = "## An idle local stack's memory (recorded by hand)\n\nkept\n"
    document = "# NormLab benchmarks\n\n## Norm layers\n\nmeasured\n\n_(took 4 s)_\n\n" + kept
    first = f"{bench.HEADING}\n\nold numbers\n\n_(took 9 s)_\n"
    inserted = bench.replace_section(document, first, before=kept.splitlines()[0])
    assert inserted == document.replace(kept, first + "\n" + kept)
    second = f"{bench.HEADING}\n\nnew numbers\n\n### a scenario\n\n_(took 8 s)_\n"
    replaced = bench.replace_section(inserted, second, before=kept.splitlines()[0])
    assert replaced == document.replace(kept, second + "\n" + kept)
    assert "old numbers" not in replaced


def test_every_scenario_cites_a_report_with_paired_seeds_for_each_of_its_arms():
    comparisons = set()
    for scenario in bench.SCENARIOS:
        spread = bench.measured_spread(scenario.report)
        assert all(arm.method in spread.paired for arm in scenario.arms), scenario.name
        assert all(arm.source for arm in scenario.arms)
        comparisons.add(len(scenario.arms))
        if scenario.test == "superiority":
            assert scenario.design(spread, "obrien_fleming").effect == scenario.effect_of_interest() > 0
        else:
            assert math.isfinite(scenario.margin(spread) or math.nan)
    assert 1 in comparisons and max(comparisons) >= 4


def test_the_tests_alone_share_one_sided_behaviour_between_non_inferiority_and_equivalence():
    rows = bench.calibrate(300)
    assert [(r.test, r.spending) for r in rows] == [
        (test, spending)
        for test in ("superiority", "non_inferiority", "equivalence")
        for spending in ("obrien_fleming", "pocock")
    ]
    by = {(r.test, r.spending): r for r in rows}
    for spending in ("obrien_fleming", "pocock"):
        # Equivalence's margin is so wide that its far test always rejects: on the same draws its near test
        # is the non-inferiority test, decision for decision, sequential and fixed alike.
        assert by["equivalence", spending].error == by["non_inferiority", spending].error
        assert by["equivalence", spending].fixed_error == by["non_inferiority", spending].fixed_error
    for row in rows:
        assert row.studies == 300 and 0.0 < row.error < 0.2
        # The paired difference from the exact fixed test is the two error rates' difference, same draws.
        assert row.excess == pytest.approx(row.error - row.fixed_error)
        assert row.excess_se > 0.0
