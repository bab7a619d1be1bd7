"""The trial plan: how many seeds one trial trains and what GPU share it asks for (resources "auto")."""

from __future__ import annotations

import pytest

from workers.trials.plan import (
    MAX_TRIALS_PER_GPU,
    gpu_share_for,
    plan_trials,
    seed_batches,
    seeds_per_trial_for,
    trials_run_on_cpu,
)
from workers.trials.throughput import Measurement, Setting, ThroughputChoice

GIB = 2**30


@pytest.mark.parametrize(
    "seeds, per_trial, expected",
    [
        ([0, 1, 2], 1, [[0], [1], [2]]),
        ([0, 1, 2], 8, [[0, 1, 2]]),
        (list(range(10)), 8, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]),  # balanced, not 8 + 2
        ([5, 3, 9, 7], 3, [[5, 3], [9, 7]]),  # order kept
        (list(range(7)), 3, [[0, 1, 2], [3, 4], [5, 6]]),
    ],
)
def test_seeds_are_cut_into_the_fewest_balanced_batches(seeds, per_trial, expected):
    assert seed_batches(seeds, per_trial) == expected


def test_a_batch_size_below_one_is_refused():
    with pytest.raises(ValueError, match="per_trial"):
        seed_batches([0], 0)


@pytest.mark.parametrize(
    "requested, gpu, compile_mode, seeds, expected",
    [
        ("auto", 0.0, "none", 10, 1),  # CPU trials: stacking buys nothing
        ("auto", 0.25, "none", 10, 8),
        ("auto", 0.25, "none", 3, 3),
        ("auto", 0.25, "reduce-overhead", 10, 1),  # compiled stacking is asked for, never chosen
        (4, 0.25, "reduce-overhead", 10, 4),
        (4, 0.0, "none", 10, 4),  # a number is taken as it is
    ],
)
def test_seeds_per_trial_auto_rule(requested, gpu, compile_mode, seeds, expected):
    assert seeds_per_trial_for(requested, gpu=gpu, compile_mode=compile_mode, num_seeds=seeds) == expected


@pytest.mark.parametrize(
    "peak_gib, device_gib, trials",
    [
        (60, 140, 1),  # a big trial keeps the GPU to itself
        (20, 140, 4),  # 20 * 1.25 + 0.6 = 25.6 GiB each: 4 fit in 126 GiB
        (0.5, 140, MAX_TRIALS_PER_GPU),  # tiny trials: capped
        (200, 140, 1),  # larger than the device: still one (the trial's own OOM then says so)
    ],
)
def test_the_gpu_share_packs_as_many_trials_as_the_measured_peak_allows(peak_gib, device_gib, trials):
    share = gpu_share_for(int(peak_gib * GIB), device_gib * GIB)
    assert share == pytest.approx(1 / trials, abs=1e-4)
    assert share * trials <= 1.0  # n shares never oversubscribe the device


def test_three_trials_per_gpu_round_down_so_three_fit():
    share = gpu_share_for(int(33 * GIB), 140 * GIB)  # 33 * 1.25 + 0.6 = 41.9 GiB: 3 fit
    assert share == 0.3333 and 3 * share <= 1.0


def _plan(**overrides):
    calls = []

    def measure(k):
        calls.append(k)
        return 10 * GIB, 140 * GIB

    args = {
        "cpu": 2.0,
        "gpu": "auto",
        "seeds_per_trial": "auto",
        "compile_mode": "none",
        "num_seeds": 5,
        "cluster_gpus": 1.0,
        "measure_peak": measure,
    }
    return plan_trials(**{**args, **overrides}), calls


def test_auto_on_a_gpu_cluster_measures_the_seed_batch_it_will_run_and_packs_by_it():
    plan, calls = _plan()
    assert calls == [5]  # 5 seeds fit one batch of at most 8
    assert plan.seeds_per_trial == 5 and plan.gpu == gpu_share_for(10 * GIB, 140 * GIB)
    assert "10.00 GiB" in plan.gpu_reason and f"{round(1 / plan.gpu)} trial(s) share a GPU" in plan.gpu_reason


def test_auto_on_a_cluster_without_gpus_is_a_cpu_trial_and_measures_nothing():
    plan, calls = _plan(cluster_gpus=0.0)
    assert calls == [] and (plan.gpu, plan.seeds_per_trial) == (0.0, 1)
    assert "no GPU" in plan.gpu_reason


def test_a_gpu_share_set_in_the_spec_is_kept_and_nothing_is_measured():
    plan, calls = _plan(gpu=0.5, seeds_per_trial=2)
    assert calls == [] and (plan.gpu, plan.seeds_per_trial) == (0.5, 2)
    assert "1 seed" not in plan.describe() and "2 seed(s)" in plan.describe()


@pytest.mark.parametrize(
    ("gpu", "cluster_gpus"), [(0, 0.0), (0, 8.0), ("auto", 0.0), ("auto", 8.0), (0.5, 8.0)]
)
def test_whether_trials_run_on_cpu_is_known_before_planning_and_agrees_with_the_plan(gpu, cluster_gpus):
    plan = plan_trials(
        cpu=1.0,
        gpu=gpu,
        seeds_per_trial="auto",
        compile_mode="none",
        num_seeds=3,
        cluster_gpus=cluster_gpus,
        measure_peak=lambda k: (2**30, 80 * 2**30),
    )
    assert trials_run_on_cpu(gpu, cluster_gpus=cluster_gpus) is (plan.gpu == 0)


# ----- a measured choice (workers.trials.throughput) -------------------------------------------------------


def _measured(setting):
    baseline = Measurement(Setting(1, "none", 1), 1_000.0)
    chosen = Measurement(setting, 9_000.0)
    return ThroughputChoice(
        setting=setting,
        measurements=(baseline, chosen) if setting != baseline.setting else (baseline,),
        samples_per_seed=1e6,
        gpu="NVIDIA H200",
        source="measured",
    )


def test_a_measured_choice_sets_seeds_compile_and_trials_per_gpu_after_the_memory_probe():
    asked = []

    def choose(trials_per_gpu, share):
        asked.append((trials_per_gpu, share))
        return _measured(Setting(4, "reduce-overhead", 8))

    plan, calls = _plan(choose=choose)
    share = gpu_share_for(10 * GIB, 140 * GIB)
    assert calls == [5] and asked == [([1, 8], share)]  # the largest stack's memory decides what may pack
    assert (plan.seeds_per_trial, plan.compile_mode, plan.gpu) == (4, "reduce-overhead", share)
    assert plan.throughput is not None and "chosen by throughput" in plan.describe()
    assert plan.to_dict()["throughput"]["chosen"] == {
        "seeds_per_trial": 4,
        "compile": "reduce-overhead",
        "trials_per_gpu": 8,
    }


def test_one_trial_per_gpu_measured_fastest_takes_the_whole_gpu():
    plan, _ = _plan(choose=lambda n, share: _measured(Setting(5, "reduce-overhead", 1)))
    assert (plan.gpu, plan.seeds_per_trial) == (1.0, 5)


def test_no_measured_choice_keeps_the_spec_time_rule():
    plan, calls = _plan(choose=lambda n, share: None)
    assert calls == [5] and (plan.seeds_per_trial, plan.compile_mode, plan.throughput) == (5, "none", None)


def test_a_spec_gpu_share_is_kept_and_the_choice_runs_at_its_packing():
    asked = []

    def choose(trials_per_gpu, share):
        asked.append((trials_per_gpu, share))
        return _measured(Setting(8, "reduce-overhead", 4))

    plan, calls = _plan(gpu=0.25, choose=choose)
    assert calls == [] and asked == [([4], 0.25)]
    assert (plan.gpu, plan.seeds_per_trial, plan.compile_mode) == (0.25, 8, "reduce-overhead")


@pytest.mark.parametrize(("gpu", "cluster_gpus"), [(0, 8.0), ("auto", 0.0)])
def test_on_cpu_nothing_is_measured_and_todays_rule_holds(gpu, cluster_gpus):
    plan, calls = _plan(gpu=gpu, cluster_gpus=cluster_gpus, choose=lambda *a: pytest.fail("measured on CPU"))
    assert calls == [] and (plan.gpu, plan.seeds_per_trial, plan.compile_mode) == (0.0, 1, "none")
