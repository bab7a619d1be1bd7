"""The seeds a study planned for each row of its results table, keyed the way the table keys its rows."""

from __future__ import annotations

from pathlib import Path

from studies.spec import load_spec
from studies.store.results import planned_seeds

EXAMPLES = Path(__file__).resolve().parents[3] / "studies" / "examples"


def test_a_tuned_study_plans_its_seeds_per_method():
    spec = load_spec((EXAMPLES / "quick.yaml").read_text())
    assert planned_seeds([spec]) == {method: list(spec.seeds) for method in spec.methods}


def test_a_grid_study_plans_its_seeds_per_grid_point_keyed_by_method_and_point_never_by_a_label():
    spec = load_spec((EXAMPLES / "fashion_mnist_rank_grid.yaml").read_text())
    plan = planned_seeds([spec])
    points = [(method, point.label) for method in spec.methods for point in spec.grid_points(method)]
    assert list(plan) == points and len(points) == 2 * 2 * 3 * 2
    assert all(seeds == [0, 1, 2] for seeds in plan.values())


def test_seeds_of_several_studies_are_pooled_without_repeats():
    quick = load_spec((EXAMPLES / "quick.yaml").read_text())
    more = quick.model_copy(update={"seeds": [*quick.seeds, 99]})
    plan = planned_seeds([quick, more])
    assert all(seeds == [*quick.seeds, 99] for seeds in plan.values())


def test_a_sequential_grid_plans_each_point_the_seeds_its_looks_gave_it():
    spec = load_spec(
        Path(__file__).resolve().parents[3] / "studies/catalog/autonorm_s_post_freeze_gate_ablation/cpu.yaml"
    )
    given = {
        "autonorm_s [post_freeze_gate=sample]": 60,
        "autonorm_s [post_freeze_gate=expected]": 30,
        "autonorm_s [post_freeze_gate=hard]": 60,
        "frozen_ln [base]": 10,
    }
    plan = planned_seeds([spec], seeds_per_arm=[given])
    assert plan[("autonorm_s", "post_freeze_gate=expected")] == list(range(30))  # stopped at look 3
    assert plan[("frozen_ln", "base")] == list(range(10))  # in no pair: the first look only
    assert plan[("autonorm_s", "post_freeze_gate=hard")] == list(range(60))
