"""StudySpec validation: strict knob rules, clear messages with field paths, limits, driver helpers."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from studies.limits import StudyLimits
from studies.spec import (
    DATASET_TASK_FIELDS,
    DEFAULT_NUM_SAMPLES,
    KNOBS,
    KNOWN_MODELS,
    METHODS,
    MODEL_CONFIG_FIELDS,
    Choice,
    Fixed,
    IntRange,
    LogUniform,
    StudySpec,
    Uniform,
    has_searchable_knobs,
)

BASE = {
    "name": "t",
    "dataset": "digits",
    "methods": ["autonorm_s", "frozen_ln", "dyt"],
    "seeds": [0, 1, 2],
    # Above the paper's default t_freeze of 10, so autonorm_s can freeze without a t_freeze of its own.
    "budget": {"epochs": 12, "batch_size": 32},
}


def spec(**changes) -> StudySpec:
    return StudySpec.model_validate({**BASE, **changes})


def errors(context=None, **changes) -> dict[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        StudySpec.model_validate({**BASE, **changes}, context=context)
    return {tuple(e["loc"]): e["msg"] for e in caught.value.errors()}


def test_a_minimal_spec_gets_documented_defaults():
    s = StudySpec.model_validate({"name": "m", "dataset": "digits", "methods": ["dyt"]})
    assert s.kind == "compare" and s.seeds == [0, 1, 2] and s.split_seed == 0
    assert s.scheduler.type == "none" and s.resources.cpu == 1
    assert s.resources.gpu == "auto" and s.resources.seeds_per_trial == "auto"  # resolved by the driver
    assert s.num_samples_for("dyt") == DEFAULT_NUM_SAMPLES
    assert s.model.preset is None  # the dataset's default backbone


def test_the_spec_round_trips_through_its_json_form_for_compare_and_grid():
    compare = spec(search={"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}}, num_samples=3)
    grid = spec(
        kind="grid", methods=["frozen_ln"], search={"skip_scale": {"type": "grid", "values": [0.5, 1.0]}}
    )
    for original in (compare, grid):
        assert StudySpec.model_validate(original.model_dump(mode="json")) == original


@pytest.mark.parametrize("dataset", ["imagenet", "MNIST", ""])
def test_unknown_datasets_are_rejected_listing_the_known_ones(dataset):
    message = errors(dataset=dataset)[("dataset",)]
    assert f"unknown dataset '{dataset}'" in message and "digits" in message


def test_unknown_and_repeated_methods_are_rejected():
    assert "unknown method(s) layernorm" in errors(methods=["layernorm"])[("methods",)]
    assert "unique" in errors(methods=["dyt", "dyt"])[("methods",)]


def test_every_knob_names_the_methods_it_applies_to_and_shared_knobs_must_fit_every_method():
    problems = errors(search={"tau": 0.5, "t_freeze": 3, "eps_h": 0.1})
    assert problems[("search", "tau")] == (
        "knob 'tau' does not apply to method 'frozen_ln' (it applies to autonorm_s, autonorm only); "
        "move it under method_search.autonorm_s"
    )
    assert "'t_freeze' does not apply to method 'frozen_ln'" in problems[("search", "t_freeze")]
    assert "'eps_h' does not apply" in problems[("search", "eps_h")]


@pytest.mark.parametrize(("method", "knob"), [("dyt", "tau"), ("autonorm", "t_freeze"), ("film", "eps_h")])
def test_per_method_knobs_that_do_not_apply_are_rejected_not_ignored(method, knob):
    problems = errors(methods=[method], method_search={method: {knob: 1}})
    assert f"knob '{knob}' does not apply to method '{method}'" in problems[("method_search", method, knob)]


def test_method_search_may_only_name_methods_of_the_study():
    assert "not in methods" in errors(method_search={"film": {"lr": 0.01}})[("method_search", "film")]


def test_unknown_knobs_are_rejected_listing_the_known_ones():
    message = errors(search={"learning_rate": 0.1})[("search", "learning_rate")]
    assert "unknown knob 'learning_rate'" in message and "lr" in message


@pytest.mark.parametrize(
    ("knob", "distribution", "fragment"),
    [
        ("lr", {"type": "uniform", "low": 0.0, "high": 0.1}, "(0, 1]"),
        ("lr", {"type": "choice", "values": [0.1, 2.0]}, "got 2"),
        ("weight_decay", {"type": "uniform", "low": -0.1, "high": 0.1}, "[0, 1]"),
        ("drop_path", 1.0, "[0, 1)"),
        (
            "norm_placement",
            {"type": "choice", "values": ["pre", "sideways"]},
            "one of pre, post, output, none",
        ),
        ("norm_placement", {"type": "uniform", "low": 0, "high": 1}, "categorical"),
        ("skip_scale", {"type": "choice", "values": ["big"]}, "takes a number"),
        ("skip_scale", True, "takes a number"),
        ("width_expansion", 0, "(0, 64]"),
    ],
)
def test_knob_values_outside_their_range_are_rejected(knob, distribution, fragment):
    assert fragment in errors(search={knob: distribution})[("search", knob)]


def test_integer_knobs_refuse_float_distributions_and_values():
    s = {"methods": ["autonorm_s"]}
    uniform = {"autonorm_s": {"t_freeze": {"type": "uniform", "low": 1, "high": 5}}}
    assert "use type int" in errors(**s, method_search=uniform)[("method_search", "autonorm_s", "t_freeze")]
    halves = {"autonorm_s": {"t_freeze": {"type": "choice", "values": [1.5]}}}
    assert (
        "takes an integer" in errors(**s, method_search=halves)[("method_search", "autonorm_s", "t_freeze")]
    )


def test_eps_h_must_lie_within_the_range_of_a_two_way_entropy():
    s = {"methods": ["autonorm_s"]}
    message = errors(**s, method_search={"autonorm_s": {"eps_h": 0.8}})[
        ("method_search", "autonorm_s", "eps_h")
    ]
    assert "(0, 0.693147]" in message
    assert spec(**s, method_search={"autonorm_s": {"eps_h": math.log(2)}}).method_search


@pytest.mark.parametrize(
    ("distribution", "fragment"),
    [
        ({"type": "uniform", "low": 0.5, "high": 0.1}, "must be below high"),
        ({"type": "loguniform", "low": 0.0, "high": 0.1}, "low > 0"),
        ({"type": "int", "low": 3, "high": 3}, "must be below high"),
        ({"type": "int", "low": 0, "high": 3, "log": True}, "log: true needs low >= 1"),
        ({"type": "choice", "values": []}, "at least 1"),
        ({"type": "choice", "values": [0.1, 0.1]}, "unique"),
        ({"type": "normal", "mu": 0}, "does not match any of the expected tags"),
    ],
)
def test_malformed_distributions_are_rejected(distribution, fragment):
    (message,) = [m for loc, m in errors(search={"lr": distribution}).items() if loc[:2] == ("search", "lr")]
    assert fragment in message


def test_scalars_are_shorthand_for_fixed_values():
    s = spec(search={"lr": 0.001}, method_search={"autonorm_s": {"tau": 0.5}})
    assert s.search_space_for("autonorm_s") == {
        "lr": Fixed(type="fixed", value=0.001),
        "tau": Fixed(type="fixed", value=0.5),
    }


def test_method_search_overrides_the_shared_search_for_that_method_only():
    shared = {"type": "loguniform", "low": 1e-4, "high": 1e-2}
    s = spec(search={"lr": shared}, method_search={"dyt": {"lr": 0.003}})
    assert s.search_space_for("dyt")["lr"] == Fixed(type="fixed", value=0.003)
    assert s.search_space_for("frozen_ln")["lr"] == LogUniform(type="loguniform", low=1e-4, high=1e-2)
    with pytest.raises(KeyError):
        s.search_space_for("film")


def test_compare_studies_refuse_grid_distributions_and_grid_studies_refuse_random_ones():
    grid = {"type": "grid", "values": [0.5, 1.0]}
    assert "use type: choice" in errors(search={"skip_scale": grid})[("search", "skip_scale")]
    uniform = {"type": "uniform", "low": 0.5, "high": 1.0}
    assert "needs a tuner" in errors(kind="grid", search={"skip_scale": uniform})[("search", "skip_scale")]


def test_grid_studies_refuse_num_samples_and_early_stopping():
    problems = errors(kind="grid", num_samples=4, scheduler="asha")
    assert "does not apply to kind: grid" in problems[("num_samples",)]
    assert "early-stopping" in problems[("scheduler",)]


def test_grid_points_are_the_cartesian_product_with_fixed_knobs_riding_along():
    s = spec(
        kind="grid",
        methods=["frozen_ln"],
        search={
            "norm_placement": {"type": "grid", "values": ["pre", "post"]},
            "skip_scale": {"type": "grid", "values": [0.5, 1.0, 2.0]},
            "lr": 0.001,
        },
    )
    points = s.grid_points("frozen_ln")
    assert len(points) == 6
    assert points[0].label == "norm_placement=pre,skip_scale=0.5"
    assert points[0].knobs == {"lr": 0.001, "norm_placement": "pre", "skip_scale": 0.5}
    assert s.planned_trials_by_phase() == {"grid": 6 * 3}
    with pytest.raises(ValueError):
        spec().grid_points("dyt")


LR_SEARCH = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}}


def test_planned_trials_count_tuning_per_method_plus_every_method_on_every_seed():
    s = spec(search=LR_SEARCH, num_samples={"autonorm_s": 10, "frozen_ln": 4, "dyt": 4})
    assert s.planned_trials_by_phase() == {"tune": 18, "final": 9}
    assert s.planned_trials() == 27
    assert s.num_samples_for("autonorm_s") == 10


def test_a_method_with_nothing_to_search_plans_no_tuning_trials_like_the_driver():
    # Only autonorm_s has a searchable knob; frozen_ln and dyt have fixed knobs or none, so the driver
    # sends them straight to the final phase and the plan must not count tuning trials for them.
    s = spec(
        search={"lr": 1e-3},
        method_search={
            "autonorm_s": {"t_freeze": {"type": "int", "low": 1, "high": 3}},
            "dyt": {"skip_scale": 0.5},
        },
        num_samples=5,
    )
    assert [s.tunes(m) for m in s.methods] == [True, False, False]
    assert s.planned_trials_by_phase() == {"tune": 5, "final": 9}
    assert spec(num_samples=5).planned_trials_by_phase() == {"tune": 0, "final": 9}
    choice = spec(method_search={"dyt": {"activation": {"type": "choice", "values": ["gelu", "relu"]}}})
    assert choice.planned_trials_by_phase() == {"tune": DEFAULT_NUM_SAMPLES, "final": 9}


def test_a_space_is_searchable_when_some_knob_is_not_fixed():
    spaces = [
        {},
        {"lr": Fixed(type="fixed", value=1e-3)},
        {"lr": Fixed(type="fixed", value=1e-3), "tau": LogUniform(type="loguniform", low=0.1, high=1.0)},
        {"activation": Choice(type="choice", values=["gelu"])},
        {"t_freeze": IntRange(type="int", low=1, high=3)},
        {"skip_scale": Uniform(type="uniform", low=0.5, high=1.0)},
    ]
    assert [has_searchable_knobs(space) for space in spaces] == [False, False, True, True, True, True]


def test_a_num_samples_mapping_must_cover_exactly_the_study_methods():
    problems = errors(num_samples={"autonorm_s": 2, "film": 3})
    assert "no entry for 'frozen_ln'" in problems[("num_samples",)]
    assert "not in methods" in problems[("num_samples", "film")]


def test_seeds_are_unique_non_negative_replicates():
    assert "unique" in errors(seeds=[1, 2, 1])[("seeds",)]
    assert "[0, 2**32)" in errors(seeds=[-1])[("seeds",)]
    assert "at least 1" in errors(seeds=[])[("seeds",)]


def test_budget_scheduler_and_resources_are_bounded():
    assert "below epochs" in errors(budget={"epochs": 3, "warmup_epochs": 3})[("budget",)]
    assert "exceeds budget.epochs" in errors(scheduler={"type": "asha", "max_t": 13})[("scheduler", "max_t")]
    too_long_grace = errors(scheduler={"type": "asha", "grace_period": 13})
    assert "exceeds the 12 epochs" in too_long_grace[("scheduler", "grace_period")]
    assert ("resources", "gpu") in errors(resources={"gpu": 2})
    assert ("resources", "gpu") in errors(resources={"gpu": "half"})
    assert ("resources", "cpu") in errors(resources={"cpu": 0})
    assert "in [1, 64]" in errors(resources={"seeds_per_trial": 0})[("resources", "seeds_per_trial")]
    assert ("resources", "seeds_per_trial") in errors(resources={"seeds_per_trial": 65})


def test_the_checkpoint_interval_is_the_services_unless_the_budget_names_seconds_of_zero_or_more():
    assert spec().budget.checkpoint_every_s is None
    assert spec(budget={"epochs": 12, "checkpoint_every_s": 0}).budget.checkpoint_every_s == 0.0
    assert ("budget", "checkpoint_every_s") in errors(budget={"epochs": 12, "checkpoint_every_s": -5})
    assert ("budget", "checkpoint_every_s") in errors(budget={"epochs": 12, "checkpoint_every_s": "nan"})


def test_seed_batches_may_be_compiled():
    compiled = spec(resources={"seeds_per_trial": 4}, budget={"epochs": 12, "compile": "reduce-overhead"})
    assert (compiled.resources.seeds_per_trial, compiled.budget.compile) == (4, "reduce-overhead")
    compiled_auto = StudySpec.model_validate({**BASE, "budget": {"epochs": 12, "compile": "default"}})
    assert compiled_auto.resources.seeds_per_trial == "auto"  # auto resolves to 1 under compile
    assert ("max_failures",) in errors(max_failures=-1)


def test_the_model_must_exist_and_fit_the_dataset():
    assert "unknown model 'resnet50'" in errors(model="resnet50")[("model", "preset")]
    message = errors(model="encoder_tiny")[("model", "preset")]
    assert "text backbone" in message and "use vit_lite_tiny or vit_lite_paper" in message
    assert spec(model={"preset": "vit_lite_paper"}).model.preset == "vit_lite_paper"


def test_residual_mlp_is_not_a_study_model_because_it_has_no_task_head():
    assert "residual_mlp" not in KNOWN_MODELS
    assert "unknown model 'residual_mlp'" in errors(model="residual_mlp")[("model", "preset")]


def test_model_overrides_must_be_config_fields_of_the_backbone():
    s = spec(model={"preset": "vit_lite_tiny", "overrides": {"depth": 3, "patch_size": 4, "dropout": 0.0}})
    assert s.model.overrides == {"depth": 3, "patch_size": 4, "dropout": 0.0}
    message = errors(model={"preset": "vit_lite_tiny", "overrides": {"bogus": 1}})[
        ("model", "overrides", "bogus")
    ]
    assert "vit_lite has no config field 'bogus'" in message
    assert "depth" in message and "patch_size" in message and "norm_placement" in message
    # Without a preset the dataset's default backbone decides (digits -> vit_lite)...
    assert ("model", "overrides", "vocab") in errors(model={"overrides": {"vocab": 10}})
    # ... and encoder fields are checked against the encoder, tabular against the tabular model.
    text = {"dataset": "ptb_pos_sample", "model": {"overrides": {"patch_size": 2}}}
    assert "encoder has no config field 'patch_size'" in errors(**text)[("model", "overrides", "patch_size")]
    tabular = {
        "dataset": "california_housing",
        "model": {"preset": "tabular_tiny", "overrides": {"depth": 1}},
    }
    assert spec(**tabular).model.overrides == {"depth": 1}


def test_model_overrides_may_not_set_the_norm_or_the_task_fields_the_dataset_decides():
    norm = errors(model={"preset": "vit_lite_tiny", "overrides": {"norm": "dyt", "norm_options": {}}})
    assert "choose the norm" in norm[("model", "overrides", "norm")]
    assert "choose the norm" in norm[("model", "overrides", "norm_options")]
    for field, dataset in [
        ("image_size", "digits"),
        ("in_channels", "digits"),
        ("num_classes", "digits"),
        ("vocab_size", "ptb_pos_sample"),
        ("max_len", "ptb_pos_sample"),
        ("head", "ptb_pos_sample"),
        ("pad_id", "ptb_pos_sample"),
        ("num_features", "california_housing"),
        ("num_outputs", "california_housing"),
    ]:
        message = errors(dataset=dataset, model={"overrides": {field: 1}})[("model", "overrides", field)]
        assert f"may not set '{field}': dataset '{dataset}' decides the task fields" in message
    assert set(DATASET_TASK_FIELDS) <= set().union(*MODEL_CONFIG_FIELDS.values())


def test_reference_defaults_to_frozen_ln_and_must_be_a_study_method():
    assert spec().reference == "frozen_ln"
    assert spec(methods=["dyt", "film"]).reference == "dyt"
    assert spec(reference_method="dyt").reference == "dyt"
    assert "not in methods" in errors(reference_method="film")[("reference_method",)]
    assert "not in methods" in errors(paper_numbers={"film": 80.0})[("paper_numbers", "film")]


def test_typos_in_field_names_are_errors_not_silently_dropped():
    assert ("budjet",) in errors(budjet={"epochs": 3})
    assert ("budget", "epoch") in errors(budget={"epoch": 3})


def test_limits_from_the_validation_context_cap_epochs_seeds_and_trials():
    limits = {"limits": StudyLimits(max_trials=10, max_seeds=2, max_epochs=3)}
    problems = errors(context=limits, search=LR_SEARCH)
    assert "at most 3 epochs per trial" in problems[("budget", "epochs")]
    assert "at most 2" in problems[("seeds",)]
    assert "plans 33 trials (tune 24 + final 9)" in problems[("num_samples",)]
    assert spec().budget.epochs == 12  # without limits the same spec is valid


def test_the_knob_table_covers_the_issue_knobs_and_only_known_methods():
    for name in (
        "t_freeze",
        "eps_h",
        "tau",
        "skip_scale",
        "init_scale",
        "width_expansion",
        "norm_placement",
        "lr",
    ):
        assert name in KNOBS
    for knob in KNOBS.values():
        assert knob.methods is None or set(knob.methods) <= set(METHODS)


def test_a_study_may_name_the_catalog_claim_it_tests():
    assert spec().claim is None
    tested = spec(claim="autonorm-s-beats-frozen-ln-cifar10")
    assert tested.claim == "autonorm-s-beats-frozen-ln-cifar10"
    assert tested.model_dump(mode="json")["claim"] == "autonorm-s-beats-frozen-ln-cifar10"
    assert "at most 120 characters" in errors(claim="c" * 121)[("claim",)]
    assert "at least 1 character" in errors(claim="")[("claim",)]
