"""studies.tables.build_results_table: rows, comparisons, adjustment, verdicts and edge cases."""

from __future__ import annotations

import json
import math
import re

import pytest
from scipy import stats

from studies.stats import adjust, compare_by_seed, summarize
from studies.tables import TrialRecord, build_results_table

from .test_records import BETTER_ACC, NOISE_ACC, REFERENCE_ACC, WORSE_ACC, cifar_records, records_for


def build(records, **options):
    options.setdefault("dataset", "cifar10")
    options.setdefault("metric", "accuracy")
    options.setdefault("higher_is_better", True)
    return build_results_table(records, **options)


def rows_by_label(table):
    return {row.label: row for row in table.rows}


def assert_json_safe(table) -> None:
    text = json.dumps(table.to_json(), allow_nan=False)  # raises on NaN or inf
    assert "NaN" not in text and "Infinity" not in text


def test_json_has_exactly_dataset_metric_reference_and_rows() -> None:
    data = build(cifar_records()).to_json()
    assert list(data) == ["dataset", "dataset_note", "metric", "reference", "rows"]
    assert data["dataset_note"] is None  # only stand-in datasets carry a note
    assert (data["dataset"], data["metric"], data["reference"]) == ("cifar10", "accuracy", "frozen_ln")
    assert [list(row)[:5] for row in data["rows"]] == [["method", "group", "n", "mean", "ci_low"]] * 4
    assert all(
        {"ci_high", "p_value", "p_adjusted", "verdict", "mlflow_run_ids"} <= set(r) for r in data["rows"]
    )


def test_one_row_per_method_with_the_reference_first_then_alphabetical() -> None:
    table = build(cifar_records())
    assert [row.method for row in table.rows] == ["frozen_ln", "autonorm_s", "dyt", "film"]
    assert table.rows[0].is_reference and table.rows[0].verdict == "reference"
    assert table.rows[0].p_value is None and table.rows[0].diff_mean is None


def test_row_statistics_are_summarize_and_paired_compare_by_seed() -> None:
    row = rows_by_label(build(cifar_records()))["autonorm_s"]
    summary = summarize(BETTER_ACC)
    comparison = compare_by_seed(dict(enumerate(BETTER_ACC)), dict(enumerate(REFERENCE_ACC)))
    assert (row.n, row.mean, row.ci_low, row.ci_high) == (6, summary.mean, summary.ci_low, summary.ci_high)
    assert (row.boot_low, row.boot_high, row.iqm) == (summary.boot_low, summary.boot_high, summary.iqm)
    assert row.paired is True and row.test == "paired t-test"
    assert row.p_t == pytest.approx(stats.ttest_rel(BETTER_ACC, REFERENCE_ACC).pvalue)
    assert row.p_wilcoxon == pytest.approx(stats.wilcoxon(BETTER_ACC, REFERENCE_ACC).pvalue)
    assert (row.diff_mean, row.diff_ci_low, row.effect_size) == (
        comparison.diff_mean,
        comparison.diff_ci_low,
        comparison.effect_size,
    )
    assert row.per_seed == tuple(enumerate(BETTER_ACC))


def test_p_values_are_holm_adjusted_across_the_rows_of_the_table() -> None:
    table = build(cifar_records())
    compared = [row for row in table.rows if not row.is_reference]
    expected = adjust([row.p_value for row in compared], "holm")
    assert [row.p_adjusted for row in compared] == pytest.approx(expected)
    assert all(row.p_adjusted >= row.p_value for row in compared)


def test_benjamini_hochberg_is_available_as_the_adjustment() -> None:
    table = build(cifar_records(), adjustment="bh")
    compared = [row for row in table.rows if not row.is_reference]
    assert [row.p_adjusted for row in compared] == pytest.approx(adjust([r.p_value for r in compared], "bh"))
    assert table.to_json()["rows"][1]["adjustment"] == "bh"


def test_verdicts_say_better_worse_and_no_significant_difference() -> None:
    rows = rows_by_label(build(cifar_records()))
    assert rows["autonorm_s"].verdict == "better"
    assert rows["film"].verdict == "worse"
    assert rows["dyt"].verdict == "no significant difference"


def test_lower_rmse_is_better_when_the_metric_is_lower_is_better() -> None:
    # Same numbers read as RMSE: the method with the larger values is now the worse one.
    rmse = build(cifar_records(), metric="rmse", higher_is_better=False)
    rows = rows_by_label(rmse)
    assert rows["autonorm_s"].verdict == "worse"
    assert rows["film"].verdict == "better"
    assert rows["film"].prob_improvement == 1.0
    assert rows["film"].diff_mean < 0


def test_reference_method_is_configurable() -> None:
    table = build(cifar_records(), reference="dyt")
    assert table.rows[0].method == "dyt" and table.rows[0].verdict == "reference"
    assert rows_by_label(table)["frozen_ln"].verdict in ("no significant difference", "better", "worse")


def test_a_failed_seed_is_counted_listed_and_makes_the_comparison_unpaired() -> None:
    values = [*BETTER_ACC[:2], None, *BETTER_ACC[3:]]
    table = build(records_for("autonorm_s", values) + records_for("frozen_ln", REFERENCE_ACC))
    row = rows_by_label(table)["autonorm_s"]
    assert (row.n, row.n_failed, row.n_planned, row.failed_seeds) == (5, 1, 6, (2,))
    assert row.paired is False and row.test == "Welch t-test" and row.p_wilcoxon is None
    assert any("1 of 6 seed(s) failed (seed(s) 2)" in w for w in row.warnings)
    assert any("method lacks reference seed(s) 2" in w and "unpaired" in w for w in row.warnings)
    assert_json_safe(table)


def test_pairing_on_the_shared_seeds_is_an_option_when_a_seed_failed() -> None:
    values = [*BETTER_ACC[:2], None, *BETTER_ACC[3:]]
    records = records_for("autonorm_s", values) + records_for("frozen_ln", REFERENCE_ACC)
    row = rows_by_label(build(records, on_seed_mismatch="intersect"))["autonorm_s"]
    assert row.paired is True and row.n == 5
    assert any("paired on the 5 shared seeds" in w for w in row.warnings)
    assert "paired on the seeds both completed" in build(records, on_seed_mismatch="intersect").to_markdown()
    assert "Welch t-test when seed sets differ" in build(records).to_markdown()


def test_a_succeeded_trial_without_a_finite_value_counts_as_failed() -> None:
    records = [
        TrialRecord("s1", "frozen_ln", 0, 0.8, "succeeded", None),
        TrialRecord("s1", "frozen_ln", 1, float("nan"), "succeeded", None),
        TrialRecord("s1", "frozen_ln", 2, None, "succeeded", None),
    ]
    row = build(records).rows[0]
    assert (row.n, row.n_failed) == (1, 2)


def test_running_and_cancelled_trials_are_unfinished_not_failed() -> None:
    records = [
        *records_for("frozen_ln", REFERENCE_ACC[:3]),
        TrialRecord("s1", "frozen_ln", 3, None, "running", None),
        TrialRecord("s1", "frozen_ln", 4, None, "cancelled", None),
    ]
    row = build(records).rows[0]
    assert (row.n, row.n_failed, row.n_unfinished, row.n_planned) == (3, 0, 2, 5)
    assert any("2 seed(s) not finished (seed(s) 3, 4)" in w for w in row.warnings)


def test_method_missing_reference_seeds_is_compared_unpaired_and_says_which() -> None:
    records = records_for("autonorm_s", BETTER_ACC[:4]) + records_for("frozen_ln", REFERENCE_ACC)
    row = rows_by_label(build(records))["autonorm_s"]
    assert row.paired is False
    welch = stats.ttest_ind(BETTER_ACC[:4], REFERENCE_ACC, equal_var=False)
    assert row.p_value == pytest.approx(welch.pvalue)
    assert any("method lacks reference seed(s) 4, 5" in w for w in row.warnings)
    assert any("fewer than 5" in w for w in row.warnings)


def test_one_seed_per_method_gives_insufficient_data_and_no_nan() -> None:
    table = build(records_for("autonorm_s", [0.85]) + records_for("frozen_ln", [0.83]))
    row = rows_by_label(table)["autonorm_s"]
    assert row.verdict == "insufficient data"
    assert row.mean == 0.85 and row.ci_low is None and row.p_value is None and row.p_adjusted is None
    assert row.diff_mean == pytest.approx(0.02)
    assert any("only 1 seed(s)" in w for w in row.warnings)
    assert_json_safe(table)
    for text in (table.to_csv(), table.to_markdown(), table.to_html()):
        assert not re.search(r"\bnan\b|\binf\b", text, flags=re.IGNORECASE)


def test_identical_values_give_zero_spread_and_no_significant_difference() -> None:
    same = [0.9] * 5
    table = build(records_for("autonorm_s", same) + records_for("frozen_ln", same))
    row = rows_by_label(table)["autonorm_s"]
    assert (row.std, row.ci_low, row.ci_high) == (0.0, 0.9, 0.9)
    assert (row.diff_mean, row.p_value, row.verdict) == (0.0, 1.0, "no significant difference")
    assert_json_safe(table)


def test_a_constant_gain_on_every_seed_uses_the_wilcoxon_test() -> None:
    reference = [0.80, 0.81, 0.82, 0.83, 0.84, 0.85, 0.86]
    table = build(
        records_for("autonorm_s", [v + 0.01 for v in reference]) + records_for("frozen_ln", reference)
    )
    row = rows_by_label(table)["autonorm_s"]
    assert row.test == "Wilcoxon signed-rank test" and row.p_t is None
    assert row.p_value == pytest.approx(2 / 2**7)
    assert row.verdict == "better"
    assert_json_safe(table)


def test_a_method_whose_seeds_all_failed_gets_a_row_with_insufficient_data() -> None:
    table = build(records_for("autonorm_s", [None, None, None]) + records_for("frozen_ln", REFERENCE_ACC))
    row = rows_by_label(table)["autonorm_s"]
    assert (row.n, row.n_failed, row.mean, row.verdict) == (0, 3, None, "insufficient data")
    assert "no completed seeds" in row.warnings
    assert_json_safe(table)


def test_without_the_reference_method_every_row_says_why_there_is_no_comparison() -> None:
    table = build(records_for("autonorm_s", BETTER_ACC) + records_for("dyt", NOISE_ACC))
    assert table.reference == "frozen_ln"
    for row in table.rows:
        assert row.verdict == "insufficient data"
        assert any("'frozen_ln' has no trials" in w for w in row.warnings)
    assert_json_safe(table)


def test_planned_seeds_set_n_planned_and_a_planned_method_without_trials_still_gets_a_row() -> None:
    plan = {"frozen_ln": range(8), "autonorm_s": range(8), "adanorm": range(8)}
    table = build(
        records_for("autonorm_s", BETTER_ACC) + records_for("frozen_ln", REFERENCE_ACC), planned_seeds=plan
    )
    rows = rows_by_label(table)
    assert [r.method for r in table.rows] == ["frozen_ln", "autonorm_s", "adanorm"]
    assert (rows["autonorm_s"].n, rows["autonorm_s"].n_planned, rows["autonorm_s"].n_unfinished) == (6, 8, 2)
    assert (rows["adanorm"].n, rows["adanorm"].n_planned, rows["adanorm"].verdict) == (
        0,
        8,
        "insufficient data",
    )


def test_provenance_lists_study_ids_and_mlflow_run_ids() -> None:
    records = [
        *records_for("frozen_ln", REFERENCE_ACC[:3], study_id="s1"),
        TrialRecord("s2", "frozen_ln", 3, REFERENCE_ACC[3], "succeeded", "run-from-s2"),
    ]
    row = build(records).rows[0]
    assert row.study_ids == ("s1", "s2")
    assert row.mlflow_run_ids == ("frozen_ln--0", "frozen_ln--1", "frozen_ln--2", "run-from-s2")


def test_a_seed_completed_twice_uses_the_last_record_and_warns() -> None:
    records = [
        *records_for("frozen_ln", [0.8, 0.81]),
        TrialRecord("s1", "frozen_ln", 1, 0.9, "succeeded", None),
    ]
    row = build(records).rows[0]
    assert row.per_seed == ((0, 0.8), (1, 0.9))
    assert any("completed more than once" in w for w in row.warnings)


def test_paper_values_sit_beside_ours() -> None:
    table = build(cifar_records(), paper_values={"autonorm_s": 0.8635, "frozen_ln": 0.8297})
    rows = rows_by_label(table)
    assert rows["autonorm_s"].paper_value == 0.8635 and rows["dyt"].paper_value is None
    assert table.to_json()["rows"][0]["paper_value"] == 0.8297


def test_grid_points_are_rows_compared_with_the_reference_method() -> None:
    records = (
        records_for("frozen_ln", REFERENCE_ACC)
        + records_for("autonorm", BETTER_ACC, group="tau=0.5")
        + records_for("autonorm", NOISE_ACC, group="tau=2.0")
    )
    table = build(records)
    assert [row.label for row in table.rows] == ["frozen_ln", "autonorm [tau=0.5]", "autonorm [tau=2.0]"]
    rows = rows_by_label(table)
    assert rows["autonorm [tau=0.5]"].verdict == "better"
    assert table.to_json()["rows"][1]["group"] == "tau=0.5"
    # Two grid rows form the family: Holm doubles the smaller p-value.
    assert rows["autonorm [tau=0.5]"].p_adjusted == pytest.approx(
        min(1.0, 2 * min(rows["autonorm [tau=0.5]"].p_value, rows["autonorm [tau=2.0]"].p_value))
    )


def test_a_planned_grid_point_without_trials_gets_a_row_with_its_method_and_group() -> None:
    plan = {
        ("frozen_ln", "base"): range(3),
        ("autonorm", "tau=0.5"): range(3),
        ("autonorm", "tau=2.0"): range(3),
    }
    records = records_for("frozen_ln", REFERENCE_ACC[:3], group="base") + records_for(
        "autonorm", BETTER_ACC[:3], group="tau=0.5"
    )
    table = build(records, planned_seeds=plan)
    assert [(row.method, row.group) for row in table.rows] == [
        ("frozen_ln", "base"),
        ("autonorm", "tau=0.5"),
        ("autonorm", "tau=2.0"),
    ]
    assert table.rows[0].verdict == "reference"  # the reference method's only row, whatever its group
    assert (table.rows[2].n, table.rows[2].n_planned, table.rows[2].verdict) == (0, 3, "insufficient data")


def test_a_method_with_several_grid_points_as_reference_is_ambiguous_and_says_so() -> None:
    records = records_for("autonorm", BETTER_ACC, group="a") + records_for("autonorm", NOISE_ACC, group="b")
    table = build(records, reference="autonorm")
    assert all(row.verdict == "insufficient data" for row in table.rows)
    assert any("ambiguous" in w for w in table.rows[0].warnings)
    named = build(records, reference="autonorm [b]")
    assert named.rows[0].label == "autonorm [b]" and named.rows[0].verdict == "reference"


def test_bad_options_are_refused_with_clear_messages() -> None:
    with pytest.raises(ValueError, match="unknown adjustment"):
        build(cifar_records(), adjustment="bonferroni")
    with pytest.raises(ValueError, match="between 0 and 1"):
        build(cifar_records(), confidence=95)


def test_the_confidence_level_changes_intervals_and_the_verdict_threshold() -> None:
    narrow = rows_by_label(build(cifar_records(), confidence=0.8))["autonorm_s"]
    wide = rows_by_label(build(cifar_records(), confidence=0.99))["autonorm_s"]
    assert wide.ci_high - wide.ci_low > narrow.ci_high - narrow.ci_low
    assert wide.diff_ci_high - wide.diff_ci_low > narrow.diff_ci_high - narrow.diff_ci_low
    assert all(math.isfinite(v) for v in (wide.mde_80, narrow.mde_80)) and wide.mde_80 > narrow.mde_80


def test_empty_records_give_an_empty_table() -> None:
    data = build([]).to_json()
    assert data["rows"] == []


def test_worse_accuracy_is_reported_even_with_many_rows_in_the_family() -> None:
    records = cifar_records() + records_for("adanorm", WORSE_ACC) + records_for("random_selector", NOISE_ACC)
    rows = rows_by_label(build(records))
    assert rows["adanorm"].verdict == rows["film"].verdict == "worse"
