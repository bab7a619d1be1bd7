"""The CPU prior: the architectures it reads are the presets', and it reproduces the CPU measurements it
was fitted to (BENCHMARKS.md) and the one it was checked against, as its docstring states."""

from __future__ import annotations

import math

import pytest

from models.presets import PRESETS
from studies.planning.cpu_rule import VIT_PRESETS, cpu_seconds_per_epoch
from studies.spec import validate_spec_data
from tests.studies.planning.specs import mnist_cpu


@pytest.mark.parametrize("preset", sorted(VIT_PRESETS))
def test_the_shapes_are_the_presets(preset):
    assert VIT_PRESETS[preset] == {key: PRESETS[preset][key] for key in ("depth", "dim", "patch_size")}


def _spec(**changes):
    return validate_spec_data(mnist_cpu(**changes))


def test_it_reproduces_the_paper_vits_measured_cpu_throughput():
    # BENCHMARKS.md: vit_lite_paper on fashion_mnist at batch 128, one thread: 115 samples/s.
    spec = _spec(
        dataset="fashion_mnist",
        model="vit_lite_paper",
        method_search=None,
        methods=["frozen_ln", "dyt"],
        budget={"epochs": 5, "batch_size": 128},
    )
    steps = math.ceil(54_000 / 128)
    samples_per_second = 128 / (cpu_seconds_per_epoch(spec).seconds_per_epoch / steps)
    assert samples_per_second == pytest.approx(115, rel=0.05)


def test_it_reproduces_the_quick_studys_training_time():
    # BENCHMARKS.md: 15 tiny trials of 10 epochs at batch 64 on digits trained for 47 s in all.
    spec = _spec(
        dataset="digits",
        model="vit_lite_tiny",
        method_search=None,
        methods=["frozen_ln", "dyt"],
        budget={"epochs": 10, "batch_size": 64},
    )
    assert 15 * 10 * cpu_seconds_per_epoch(spec).seconds_per_epoch == pytest.approx(47, rel=0.1)


def test_it_runs_low_on_the_mnist_cpu_study_by_no_more_than_it_says():
    # The spec's header: 65-90 s per trial measured; the rule says it runs low by up to a third.
    per_trial = 20 * cpu_seconds_per_epoch(_spec()).seconds_per_epoch
    assert 65 * 2 / 3 <= per_trial < 65


def test_other_backbones_get_no_cpu_prior_and_a_reason():
    spec = validate_spec_data(
        {"name": "tab", "dataset": "energy", "model": "tabular_tiny", "methods": ["frozen_ln", "dyt"]}
    )
    found = cpu_seconds_per_epoch(spec)
    assert found.seconds_per_epoch is None and "ViT-Lite only, not tabular_tiny" in found.reason
