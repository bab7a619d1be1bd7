"""The power table sizes every comparison it can: an equivalence claim at the paper's effect and under a
null effect, a directional one at the paper's effect; where a count cannot be computed, the row says why."""

from __future__ import annotations

from types import SimpleNamespace

from studies.report.judge import PowerRow
from studies.report.render import NOT_APPLICABLE, power_rows
from studies.tables.formatting import DASH

EQUIVALENCE_WITHOUT_EFFECT = PowerRow(
    "autonorm_s [post_freeze_gate=expected] − autonorm_s [post_freeze_gate=sample] (test_accuracy)",
    paper_effect=None,
    sd_difference=0.02576,
    seeds_run=5,
    seeds_needed=None,
    margin=0.01,
    seeds_needed_null=72,
    missing="the paper states no effect: sized for no true difference only",
)
EQUIVALENCE_WITH_EFFECT = PowerRow(
    "autonorm_s − frozen_ln (test_accuracy)", 0.0036, 0.005425, 8, 8, 0.01, seeds_needed_null=6
)
DIRECTIONAL = PowerRow("autonorm_s − frozen_ln (test_accuracy)", 0.0338, 0.0063, 5, 3)
NO_SPREAD = PowerRow(
    "autonorm_s − frozen_ln (test_accuracy)",
    0.0036,
    None,
    1,
    None,
    0.01,
    missing="fewer than two paired seeds: no spread of the differences was measured",
)


def _rendered(*rows: PowerRow) -> list[dict[str, str]]:
    """Each rendered row as header -> cell (power_rows reads only the report's `power`)."""
    headers, cells = power_rows(SimpleNamespace(power=rows))  # type: ignore[arg-type]
    return [dict(zip(headers, row, strict=True)) for row in cells]


def test_an_equivalence_claim_without_a_papers_effect_is_sized_for_no_true_difference():
    (row,) = _rendered(EQUIVALENCE_WITHOUT_EFFECT)
    assert row["seeds for 80 % (no true difference)"] == "72"
    assert row["seeds for 80 % (paper's effect)"] == DASH
    assert row["why a count is missing"] == "the paper states no effect: sized for no true difference only"
    assert row["seeds are sized to"] == "show it within ±0.01"


def test_an_equivalence_claim_with_a_papers_effect_shows_both_counts_and_no_excuse():
    (row,) = _rendered(EQUIVALENCE_WITH_EFFECT)
    assert (row["seeds for 80 % (paper's effect)"], row["seeds for 80 % (no true difference)"]) == ("8", "6")
    assert row["why a count is missing"] == ""


def test_a_directional_claim_is_not_sized_for_a_null_effect_and_says_so():
    (row,) = _rendered(DIRECTIONAL)
    assert row["seeds for 80 % (paper's effect)"] == "3"
    assert row["seeds for 80 % (no true difference)"] == NOT_APPLICABLE
    assert row["seeds are sized to"] == "detect the effect"


def test_a_dash_always_comes_with_its_reason():
    for row in _rendered(EQUIVALENCE_WITHOUT_EFFECT, EQUIVALENCE_WITH_EFFECT, DIRECTIONAL, NO_SPREAD):
        counts = (row["seeds for 80 % (paper's effect)"], row["seeds for 80 % (no true difference)"])
        assert (DASH in counts) == bool(row["why a count is missing"]), row
