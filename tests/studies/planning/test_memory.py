"""The plan's memory line: the study's largest trial as the submission checks it, on the device it trains
on, set against what one trial may use where the server's limits are given."""

from __future__ import annotations

from studies.limits import GIB, StudyLimits
from studies.planning import Cluster, plan_study
from studies.spec import validate_spec_data
from studies.spec.memory import worst_trial_memory
from tests.studies.planning.specs import cifar10_paper, mnist_cpu

CPU = Cluster(cpus=2, gpus=0, source="the local Ray head")
GPU = Cluster(cpus=16, gpus=1, source="the local Ray head")


def test_the_plan_shows_the_largest_trial_the_submission_checks_and_its_limit():
    spec = validate_spec_data(mnist_cpu())
    memory = plan_study(spec, cluster=CPU, limits=StudyLimits()).memory
    expected = worst_trial_memory(spec, device="cpu").memory
    assert (memory.bytes, memory.parameters, memory.seeds_per_trial) == (
        expected.total_bytes,
        expected.parameters,
        1,
    )
    assert (memory.device, memory.limit_bytes) == ("cpu", 16 * GIB)
    assert "NORMLAB_TRIAL_MEMORY_GIB" in (memory.limit or "")
    assert memory.method == "autonorm_s" and memory.batch_size == spec.budget.batch_size
    assert any("16 bytes a parameter" in line for line in memory.basis)


def test_without_limits_the_estimate_is_sized_for_the_clusters_device():
    spec = cifar10_paper()  # resources.gpu "auto", 8 final seeds: up to 8 per GPU trial
    on_cpu = plan_study(spec, cluster=CPU).memory
    on_gpu = plan_study(spec, cluster=GPU).memory
    assert (on_cpu.device, on_cpu.seeds_per_trial, on_cpu.limit_bytes) == ("cpu", 1, None)
    assert (on_gpu.device, on_gpu.seeds_per_trial) == ("gpu", 8)
    assert on_gpu.bytes > 7 * on_cpu.bytes


def test_a_text_dataset_says_its_vocabulary_is_an_estimate():
    spec = validate_spec_data(
        {"name": "lm", "dataset": "ptb_lm_sample", "methods": ["frozen_ln"], "budget": {"epochs": 2}}
    )
    assert any("vocabulary" in line for line in plan_study(spec, cluster=CPU).memory.basis)
