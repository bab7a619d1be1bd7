"""Bounded sizes at submission: impossible model shapes are refused at their field whatever the limits, and a
spec whose largest trial cannot fit the memory a trial has here is refused naming the field, the estimate
and the limit, before anything runs."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
from pydantic import ValidationError

from studies.limits import GIB, StudyLimits
from studies.spec import StudySpec, load_spec
from studies.spec.memory import memory_budget, worst_trial_memory

ROOT = Path(__file__).resolve().parents[2]
LIMITS = StudyLimits()  # the service's defaults: 16 GiB per CPU trial, no GPU declared
BASE = {
    "name": "sizes",
    "dataset": "digits",
    "model": {"preset": "vit_lite_tiny"},
    "methods": ["frozen_ln", "autonorm_s"],
    "seeds": [0, 1, 2],
    "budget": {"epochs": 20, "batch_size": 64},
}


def _spec(limits: StudyLimits | None = LIMITS, **changes) -> StudySpec:
    data = {**BASE, **changes}
    context = {"limits": limits} if limits is not None else None
    return StudySpec.model_validate(data, context=context)


def _errors(limits: StudyLimits | None = LIMITS, **changes) -> dict[tuple, dict]:
    with pytest.raises(ValidationError) as raised:
        _spec(limits, **changes)
    return {tuple(e["loc"]): e for e in raised.value.errors()}


def _overrides(**overrides) -> dict:
    return {"model": {"preset": "vit_lite_tiny", "overrides": overrides}}


def test_the_issues_twelve_terabyte_model_is_refused_with_its_estimate_and_the_limit():
    errors = _errors(**_overrides(dim=10**6, depth=1000))
    error = errors[("model", "overrides", "dim")]
    assert error["type"] == "over_memory"
    assert "PiB per trial" in error["msg"]  # the estimate, in words
    assert (
        "16 GiB" in error["msg"] and "NORMLAB_TRIAL_MEMORY_GIB" in error["msg"]
    )  # the limit and its setting
    assert "model.overrides.dim or model.overrides.depth" in error["msg"]  # what to change


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"heads": 0}, "heads"),
        ({"dim": 0}, "dim"),
        ({"depth": 0}, "depth"),
        ({"depth": -3}, "depth"),
        ({"depth": 2.5}, "depth"),
        ({"dim": "wide"}, "dim"),
        ({"dim": 32, "heads": 3}, "heads"),
        ({"patch_size": 3}, "patch_size"),
    ],
)
def test_impossible_shapes_are_refused_at_their_field_even_without_limits(overrides, field):
    """No limit is needed to know a model cannot be built: a stored spec re-read by the driver is checked
    too, and the message says what would build."""
    for limits in (LIMITS, None):
        errors = _errors(limits, **_overrides(**overrides))
        assert list(errors) == [("model", "overrides", field)]
        assert errors[("model", "overrides", field)]["type"] == "impossible_model_shape"


def test_a_width_the_presets_heads_do_not_divide_is_the_widths_fault():
    errors = _errors(**_overrides(dim=33))  # vit_lite_tiny has 2 heads
    assert list(errors) == [("model", "overrides", "dim")]
    assert "divisible by heads 2" in errors[("model", "overrides", "dim")]["msg"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"mlp_ratio": 0}, "mlp_ratio"),
        ({"mlp_ratio": 1000}, "mlp_ratio"),
        ({"dropout": 1.5}, "dropout"),
        ({"norm_placement": "middle"}, "norm_placement"),
        ({"skip_scale": None}, "skip_scale"),
        ({"activation": ["gelu"]}, "activation"),
    ],
)
def test_an_override_a_knob_also_sets_takes_that_knobs_range(overrides, field):
    errors = _errors(**_overrides(**overrides))
    assert list(errors) == [("model", "overrides", field)]
    assert errors[("model", "overrides", field)]["type"] == "override_out_of_range"


def test_an_override_a_knob_may_switch_off_is_accepted():
    assert _spec(**_overrides(layer_scale_init=None, mlp_ratio=4.0, branch="one_matrix")).model.overrides


def test_a_batch_too_large_for_the_trial_is_the_batch_sizes_fault_and_says_which_fits():
    small = StudyLimits(trial_memory_gib=0.25)
    errors = _errors(small, budget={"epochs": 20, "batch_size": 8192})
    error = errors[("budget", "batch_size")]
    assert "budget.batch_size" in error["msg"] and "or less fits" in error["msg"]
    fits = int(error["msg"].split("budget.batch_size ")[1].split(" or less")[0].replace(",", ""))
    assert 64 < fits < 8192
    assert _spec(small, budget={"epochs": 20, "batch_size": fits})
    _errors(small, budget={"epochs": 20, "batch_size": fits + 1})


def test_a_gpu_share_is_checked_against_its_share_of_the_declared_gpu():
    spec = {"resources": {"gpu": 0.5, "seeds_per_trial": 1}, "budget": {"epochs": 20, "batch_size": 4096}}
    estimate = worst_trial_memory(_spec(None, **spec), device="gpu").memory.total_bytes
    roomy = StudyLimits(gpu_memory_gib=4 * estimate / GIB)  # half of it holds the trial
    tight = StudyLimits(gpu_memory_gib=1.5 * estimate / GIB)  # half of it does not
    assert _spec(roomy, **spec)
    error = _errors(tight, **spec)[("budget", "batch_size")]
    assert "resources.gpu 0.5 of a" in error["msg"] and "NORMLAB_GPU_MEMORY_GIB" in error["msg"]


def test_auto_is_sized_as_a_cpu_trial_until_a_gpu_is_declared_and_then_as_a_gpu_trial_of_its_seeds():
    spec = _spec(None, seeds=[0, 1, 2, 3])
    cpu = memory_budget(spec, LIMITS)
    gpu = memory_budget(spec, StudyLimits(gpu_memory_gib=80))
    assert (cpu.device, cpu.bytes) == ("cpu", 16 * GIB)
    assert (gpu.device, gpu.bytes) == ("gpu", 80 * GIB)
    # On a GPU, "auto" stacks the final seeds (up to 8) in one trial: four models' worth of memory.
    one = worst_trial_memory(spec, device="cpu").memory
    four = worst_trial_memory(spec, device="gpu").memory
    assert (one.seeds, four.seeds) == (1, 4)
    assert four.state_bytes == 4 * one.state_bytes


def test_the_worst_case_takes_the_widest_mlp_the_search_can_give_and_the_largest_norm():
    narrow = worst_trial_memory(_spec(None), device="cpu")
    wide = worst_trial_memory(
        _spec(None, search={"width_expansion": {"type": "uniform", "low": 1.0, "high": 16.0}}), device="cpu"
    )
    assert wide.fields["mlp_ratio"] == 16.0
    assert wide.memory.parameters > narrow.memory.parameters
    assert narrow.method == "autonorm_s"  # the gated norm has a selector per norm layer


def test_without_limits_a_spec_is_not_size_checked():
    """The driver re-reads a stored spec without limits: an operator lowering them must not break it."""
    assert _spec(None, **_overrides(dim=4096, depth=64))


@pytest.mark.parametrize(
    "path",
    sorted(
        glob.glob(str(ROOT / "studies/catalog/*/*.yaml")) + glob.glob(str(ROOT / "studies/examples/*.yaml"))
    ),
    ids=lambda path: str(Path(path).relative_to(ROOT)),
)
def test_every_catalog_and_example_spec_fits_the_default_limits(path):
    text = Path(path).read_text(encoding="utf-8")
    load_spec(text, content_type="application/yaml", limits=LIMITS)
    load_spec(text, content_type="application/yaml", limits=StudyLimits(gpu_memory_gib=80))
