"""Trial counts: a plan resolves seeds per trial and cuts seed batches exactly as the workers do, and counts
a tune phase's epochs as the GPU cost model does."""

from __future__ import annotations

import pytest

from studies.planning.trials import (
    batch_count,
    largest_batch,
    resolve_seeds_per_trial,
    tune_epochs,
    tune_workload,
)
from studies.spec import validate_spec_data
from tests.studies.planning.specs import cifar10_paper, mnist_cpu
from workers.trials.plan import DEFAULT_GPU_SEEDS_PER_TRIAL, seed_batches, seeds_per_trial_for


@pytest.mark.parametrize("requested", ["auto", 1, 4, 32])
@pytest.mark.parametrize("compile_mode", ["none", "default"])
@pytest.mark.parametrize("on_gpu", [True, False])
@pytest.mark.parametrize("seeds", [3, 10])
def test_seeds_per_trial_resolve_as_the_workers_resolve_them(requested, compile_mode, on_gpu, seeds):
    spec = cifar10_paper(
        seeds=list(range(seeds)),
        budget={"epochs": 100, "batch_size": 128, "compile": compile_mode},
        resources={"gpu": 1 if on_gpu else 0, "seeds_per_trial": requested},
    )
    planned, why = resolve_seeds_per_trial(spec, on_gpu=on_gpu)
    assert planned == seeds_per_trial_for(
        requested, gpu=1.0 if on_gpu else 0.0, compile_mode=compile_mode, num_seeds=seeds
    )
    assert why


def test_the_gpu_batch_cap_is_the_workers_own():
    from studies.planning.trials import DEFAULT_GPU_SEEDS_PER_TRIAL as planned_cap

    assert planned_cap == DEFAULT_GPU_SEEDS_PER_TRIAL


@pytest.mark.parametrize(("seeds", "per_trial"), [(1, 8), (5, 8), (10, 8), (17, 8), (3, 1), (7, 2), (0, 4)])
def test_batches_are_counted_and_sized_as_the_workers_cut_them(seeds, per_trial):
    batches = seed_batches(list(range(seeds)), per_trial)
    assert batch_count(seeds, per_trial) == len(batches)
    assert largest_batch(seeds, per_trial) == max((len(b) for b in batches), default=0)


def test_asha_trains_a_tuning_trial_for_fewer_epochs_than_the_budget():
    with_asha = cifar10_paper()
    without = cifar10_paper(scheduler="none")
    assert tune_epochs(without) == 100
    # Rungs at 10, 30 and 90 epochs keeping a third each: 10 + 20/3 + 60/9 + 10/27 epochs.
    assert tune_epochs(with_asha) == pytest.approx(10 + 20 / 3 + 60 / 9 + 10 / 27)


def test_the_tune_phase_counts_each_tuned_methods_samples_and_skips_a_method_with_nothing_to_tune():
    spec = validate_spec_data(
        mnist_cpu(
            search={"weight_decay": 0.03},
            method_search={"autonorm_s": {"lr": {"type": "loguniform", "low": 0.001, "high": 0.01}}},
        )
    )
    work = tune_workload(spec)
    assert work.trials == work.processes == 3  # frozen_ln has no searchable knob: it goes straight to final
    assert work.seed_epochs == {("tune", "autonorm_s"): 3 * 20}
