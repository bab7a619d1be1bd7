"""A sequential design adds seeds look by look instead of running a fixed list: it owns the seeds (0 to
max_seeds - 1, so none is trained twice), and every combination a statistician would not sign is refused
at its field with the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.limits import StudyLimits
from studies.spec import SequentialDesign, StudySpec, parse_spec_text, validate_spec_data

BASE = {"name": "sequential", "dataset": "digits", "methods": ["frozen_ln", "dyt", "adanorm"]}
SUPERIORITY = {"effect": 0.01}


def spec(sequential=SUPERIORITY, **changes) -> StudySpec:
    return StudySpec.model_validate({**BASE, "sequential": sequential, **changes})


def errors(sequential=SUPERIORITY, context=None, **changes) -> dict[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        StudySpec.model_validate({**BASE, "sequential": sequential, **changes}, context=context)
    return {tuple(e["loc"]): e["msg"] for e in caught.value.errors()}


def design_errors(**fields) -> dict[tuple, str]:
    return errors({**SUPERIORITY, **fields})


# ----------------------------------------------------------------------------------------- the design


def test_the_defaults_are_a_superiority_design_with_five_looks_up_to_ten_seeds():
    design = spec().sequential
    assert design is not None
    assert (design.test, design.alpha, design.power, design.spending, design.futility) == (
        "superiority",
        0.05,
        0.8,
        "obrien_fleming",
        True,
    )
    assert design.looks() == [3, 5, 7, 9, 10]
    assert design.information_fractions() == pytest.approx([0.3, 0.5, 0.7, 0.9, 1.0])


@pytest.mark.parametrize(
    ("first_seeds", "seeds_per_look", "max_seeds", "looks"),
    [
        (2, 4, 10, [2, 6, 10]),  # the last look lands exactly on the maximum
        (4, 3, 5, [4, 5]),  # the last look adds fewer seeds than a full batch to reach the maximum
        (3, 1, 6, [3, 4, 5, 6]),
        (5, 10, 8, [5, 8]),
    ],
)
def test_looks_grow_by_seeds_per_look_and_end_at_max_seeds(first_seeds, seeds_per_look, max_seeds, looks):
    design = SequentialDesign(
        first_seeds=first_seeds, seeds_per_look=seeds_per_look, max_seeds=max_seeds, effect=0.01
    )
    assert design.looks() == looks
    assert design.information_fractions() == pytest.approx([n / max_seeds for n in looks])


def test_each_look_adds_the_next_seeds_so_every_seed_is_trained_once_and_in_order():
    design = SequentialDesign(first_seeds=3, seeds_per_look=2, max_seeds=8, effect=0.01)
    added = [design.seeds_added_at(look) for look in range(len(design.looks()))]
    assert added == [[0, 1, 2], [3, 4], [5, 6], [7]]
    assert [seed for batch in added for seed in batch] == design.seed_ids() == list(range(8))
    with pytest.raises(IndexError, match="outside this design's 4 looks"):
        design.seeds_added_at(4)


def test_the_design_derives_the_seeds_and_the_tune_seed_comes_after_them():
    s = spec({**SUPERIORITY, "max_seeds": 6})
    assert s.seeds == [0, 1, 2, 3, 4, 5]
    assert s.tune_seeds == [6]


def test_the_planned_final_trials_are_the_designs_maximum():
    assert spec({**SUPERIORITY, "max_seeds": 7}).planned_trials_by_phase()["final"] == 3 * 7


def test_a_stored_sequential_spec_reads_back_unchanged():
    s = spec({"test": "equivalence", "margin": 0.02, "spending": "pocock", "futility": False})
    dumped = s.model_dump(mode="json")
    assert dumped["seeds"] == list(range(10))
    assert StudySpec.model_validate(dumped) == s


def test_the_documented_yaml_validates_the_way_the_api_validates_it():
    text = """
name: sequential
dataset: digits
methods: [frozen_ln, dyt]
sequential:
  test: non_inferiority
  first_seeds: 3
  seeds_per_look: 2
  max_seeds: 9
  alpha: 0.05
  power: 0.9
  margin: 0.01
  spending: pocock
  futility: true
"""
    s = validate_spec_data(parse_spec_text(text, "application/yaml"))
    assert s.sequential is not None and s.sequential.looks() == [3, 5, 7, 9]
    assert s.seeds == list(range(9))


def test_a_spec_without_a_design_keeps_its_fixed_seeds():
    s = StudySpec.model_validate(BASE)
    assert s.sequential is None and s.seeds == [0, 1, 2]


# ------------------------------------------------------------------------------------- refused designs


def test_a_maximum_below_the_first_batch_is_refused_with_the_fix():
    message = design_errors(first_seeds=5, max_seeds=4)[("sequential", "max_seeds")]
    assert message == "max_seeds (4) is below first_seeds (5): raise max_seeds or lower first_seeds"


def test_a_maximum_that_allows_a_single_look_is_a_fixed_design_and_is_refused():
    message = design_errors(first_seeds=4, max_seeds=4)[("sequential", "max_seeds")]
    assert "single look" in message and "seeds: [0, 1, 2, 3]" in message and "raise max_seeds" in message


@pytest.mark.parametrize(("field", "value"), [("first_seeds", 1), ("first_seeds", 0), ("seeds_per_look", 0)])
def test_a_first_batch_needs_a_spread_and_every_look_adds_a_seed(field, value):
    message = design_errors(**{field: value})[("sequential", field)]
    assert f"{field} must be at least" in message and f"got {value}" in message


def test_max_seeds_is_bounded_before_the_seeds_are_derived():
    assert "at most 1000 seeds per method" in design_errors(max_seeds=10**12)[("sequential", "max_seeds")]


@pytest.mark.parametrize("alpha", [0.0, -0.05, 0.5, 0.6, 1.0])
def test_alpha_outside_zero_to_a_half_is_refused(alpha):
    assert "must lie in (0, 0.5)" in design_errors(alpha=alpha)[("sequential", "alpha")]


@pytest.mark.parametrize("alpha", [0.001, 0.05, 0.49])
def test_alpha_inside_zero_to_a_half_is_accepted(alpha):
    assert spec({**SUPERIORITY, "alpha": alpha}).sequential.alpha == alpha


@pytest.mark.parametrize("power", [0.5, 0.3, 1.0, 1.2])
def test_power_outside_a_half_to_one_is_refused(power):
    assert "must lie in (0.5, 1)" in design_errors(power=power)[("sequential", "power")]


@pytest.mark.parametrize("margin", [0.0, -0.01])
def test_a_margin_of_zero_or_below_is_refused(margin):
    message = errors({"test": "equivalence", "margin": margin})[("sequential", "margin")]
    assert "margin must be positive" in message and "margin: 0.01" in message


@pytest.mark.parametrize("effect", [0.0, -0.01])
def test_an_effect_of_zero_or_below_is_refused(effect):
    assert "effect must be positive" in errors({"effect": effect})[("sequential", "effect")]


@pytest.mark.parametrize("test", ["equivalence", "non_inferiority"])
def test_margin_tests_need_a_margin(test):
    assert f"test: {test} needs margin" in errors({"test": test})[("sequential", "margin")]


@pytest.mark.parametrize("test", ["equivalence", "non_inferiority"])
def test_margin_tests_refuse_an_effect_they_would_ignore(test):
    message = errors({"test": test, "margin": 0.01, "effect": 0.01})[("sequential", "effect")]
    assert "remove effect" in message


def test_a_superiority_test_needs_an_effect():
    message = errors({})[("sequential", "effect")]
    assert "superiority test needs effect" in message and "effect: 0.01" in message


def test_a_superiority_test_refuses_a_margin_it_would_ignore():
    message = design_errors(margin=0.01)[("sequential", "margin")]
    assert "remove margin" in message


def test_every_problem_of_a_design_is_reported_at_once():
    problems = errors({"first_seeds": 6, "max_seeds": 5, "margin": 0.01})
    assert set(problems) == {("sequential", "max_seeds"), ("sequential", "margin"), ("sequential", "effect")}


@pytest.mark.parametrize(
    ("field", "value"), [("test", "superior"), ("spending", "haybittle"), ("look_every", 2)]
)
def test_unknown_tests_spending_functions_and_fields_are_refused(field, value):
    assert ("sequential", field) in design_errors(**{field: value})


# ------------------------------------------------------------------------------- the design and the study


def test_an_explicit_seed_list_that_disagrees_with_the_design_is_refused_at_seeds():
    message = errors(seeds=[0, 1, 2])[("seeds",)]
    assert "derived: 0 to 9 (max_seeds 10)" in message and "remove seeds" in message


def test_an_explicit_seed_list_equal_to_the_designs_is_accepted():
    assert spec({**SUPERIORITY, "max_seeds": 4}, seeds=[0, 1, 2, 3]).seeds == [0, 1, 2, 3]


def test_tune_seeds_among_the_designs_seeds_are_refused():
    assert "[7] are also final seeds" in errors(tune_seeds=[7])[("tune_seeds",)]


GATES = {"type": "grid", "values": ["sample", "expected", "hard"]}
GRID = {
    "kind": "grid",
    "methods": ["autonorm_s", "frozen_ln"],
    "method_search": {"autonorm_s": {"post_freeze_gate": GATES, "t_freeze": 2}},
}
EQUIVALENCE = {"test": "equivalence", "margin": 0.01}
EXPECTED, HARD, SAMPLE = (f"autonorm_s [post_freeze_gate={g}]" for g in ("expected", "hard", "sample"))


def test_a_sequential_grid_compares_the_points_its_pairs_name_as_results_rows():
    s = spec({**EQUIVALENCE, "pairs": [[EXPECTED, SAMPLE], [HARD, SAMPLE]]}, **GRID)
    assert s.sequential_arms == [SAMPLE, EXPECTED, HARD, "frozen_ln [base]"]
    assert s.sequential_reference is None and s.sequential_comparisons == 2
    assert s.seed_phase == "grid" and s.arm_of("autonorm_s", "post_freeze_gate=hard") == HARD


def test_a_sequential_grid_without_pairs_is_refused_naming_its_points():
    message = errors(EQUIVALENCE, **GRID)[("sequential", "pairs")]
    assert "no single reference point" in message and SAMPLE in message


def test_a_grid_pair_naming_a_method_instead_of_a_point_is_refused():
    message = errors({**EQUIVALENCE, "pairs": [["autonorm_s", SAMPLE]]}, **GRID)[("sequential", "pairs", 0)]
    assert "not among the study's grid points" in message and EXPECTED in message


def test_a_compare_study_keeps_its_comparisons_with_the_reference():
    s = spec(SUPERIORITY)
    assert s.sequential_arms == ["frozen_ln", "dyt", "adanorm"]
    assert s.sequential_reference == "frozen_ln" and s.sequential_comparisons == 2 and s.seed_phase == "final"


def test_an_accuracy_effect_written_in_points_is_refused_with_the_fraction():
    message = errors({"effect": 1.5})[("sequential", "effect")]
    assert "one accuracy point is 0.01" in message and "write 0.015" in message


def test_an_rmse_effect_above_one_is_in_the_targets_units_and_accepted():
    s = spec({"effect": 1.5}, dataset="california_housing", methods=["frozen_ln", "dyt"])
    assert s.sequential.effect == 1.5


def test_the_servers_seed_limit_is_checked_at_max_seeds():
    limits = StudyLimits(max_seeds=8)
    message = errors({**SUPERIORITY, "max_seeds": 9}, context={"limits": limits})[("sequential", "max_seeds")]
    assert "at most 8 seeds" in message and "lower max_seeds" in message


# ----------------------------------------------------------------------------------------- claims


def test_a_claim_the_looks_can_answer_is_served_by_a_sequential_design():
    claimed = StudySpec.model_validate(
        {
            "name": "california",
            "dataset": "california_housing",
            "methods": ["autonorm_s", "frozen_ln"],
            "claim": "california_housing_no_gain",
            "method_search": {"autonorm_s": {"t_freeze": 8}},
            "sequential": {"test": "equivalence", "margin": 0.0275},
        }
    )
    assert claimed.claim == "california_housing_no_gain" and claimed.sequential is not None


def test_a_claim_whose_check_reads_every_seed_of_every_row_is_refused_beside_a_design():
    found = errors(claim="autonorm_s_post_freeze_gate_ablation", methods=["autonorm_s", "frozen_ln"])
    message = found[("sequential",)]
    assert "cannot be judged on a sequential design's looks" in message
    assert "rows other than a method with the reference" in message and "remove sequential" in message


@pytest.mark.parametrize(
    ("pair", "problem"),
    [
        (["dyt", "zz"], "names zz, not among the study's methods"),
        (["dyt", "dyt"], "compares a method with itself"),
        (["dyt", "frozen_ln"], "includes the reference frozen_ln"),
    ],
)
def test_an_extra_pair_must_compare_two_other_methods_of_the_study(pair, problem):
    found = errors({**SUPERIORITY, "pairs": [pair]})
    assert problem in found[("sequential", "pairs", 0)]


def test_a_pair_listed_twice_in_either_order_is_refused_and_a_fresh_one_is_kept():
    found = errors({**SUPERIORITY, "pairs": [["dyt", "adanorm"], ["adanorm", "dyt"]]})
    assert "listed twice" in found[("sequential", "pairs", 1)]
    assert spec({**SUPERIORITY, "pairs": [["dyt", "adanorm"]]}).sequential.pairs == [["dyt", "adanorm"]]
