"""Wall time on this cluster: from its own finished trials where there are some (how long each took, how
many ran at once), else a prior labelled as one, else no figure and why."""

from __future__ import annotations

from datetime import timedelta

import pytest

from studies.planning import Cluster, plan_study
from studies.planning.gpu_price import gpu_price
from studies.planning.history import History, TimedTrial
from studies.planning.trials import Workload
from studies.planning.wall import wall_clock
from studies.spec import validate_spec_data
from tests.studies.planning.specs import cifar10_paper, mnist_cpu
from tests.studies.planning.store_rows import T0

CPU_ONLY = Cluster(cpus=4, gpus=0, source="the local Ray head")


def _timed(method: str, start_s: float, seconds: float, epochs: float = 20.0) -> TimedTrial:
    return TimedTrial(
        "pilot (abc)",
        method,
        "final",
        T0 + timedelta(seconds=start_s),
        T0 + timedelta(seconds=start_s + seconds),
        epochs,
    )


def _clock(spec, history, cluster=CPU_ONLY):
    return wall_clock(spec, history=history, gpu=gpu_price(spec, final_stacked=1), cluster=cluster)


def test_the_clusters_own_trials_give_the_rate_and_how_many_ran_at_once():
    spec = validate_spec_data(mnist_cpu())
    # Two at a time: autonorm_s trials take 80 s, frozen_ln ones 60 s, for 20 epochs each.
    history = History(
        timed=(
            _timed("autonorm_s", 0, 80),
            _timed("frozen_ln", 0, 80),
            _timed("frozen_ln", 80, 60),
            _timed("frozen_ln", 80, 60),
        )
    )
    clock = _clock(spec, history)
    assert clock.pricing.source == "history" and not clock.pricing.prior
    assert clock.pricing.studies == ["pilot (abc)"]
    assert clock.concurrency == pytest.approx(2.0)
    assert clock.per_seed_epoch[("final", "autonorm_s")] == pytest.approx(4.0)
    assert clock.per_seed_epoch[("final", "frozen_ln")] == pytest.approx(3.0)
    work = Workload(2, 4, 4, {("final", "autonorm_s"): 40.0, ("final", "frozen_ln"): 40.0})
    assert clock.hours(work) == pytest.approx((40 * 4 + 40 * 3) / 2 / 3600)


def test_a_method_that_never_ran_here_is_priced_at_every_methods_median_and_the_plan_says_so():
    spec = validate_spec_data(mnist_cpu(methods=["autonorm_s", "frozen_ln", "dyt"], method_search=None))
    history = History(timed=(_timed("frozen_ln", 0, 60),))
    clock = _clock(spec, history)
    assert clock.per_seed_epoch[("final", "dyt")] == clock.per_seed_epoch[("final", "frozen_ln")]
    assert any("autonorm_s, dyt never ran here" in line for line in clock.pricing.basis)


def test_without_history_cpu_trials_get_the_cpu_prior_over_the_clusters_cpus():
    spec = validate_spec_data(mnist_cpu())  # resources: 1 CPU, no GPU
    clock = _clock(spec, History())
    assert clock.pricing.source == "cpu_prior" and clock.pricing.prior
    assert clock.concurrency == 4.0
    assert any("5.3 ms x blocks" in line for line in clock.pricing.basis)
    unknown = _clock(spec, History(), Cluster(cpus=None, gpus=None, source="elsewhere"))
    assert unknown.concurrency == 1.0 and any("CPUs unknown" in line for line in unknown.pricing.basis)


def test_without_history_gpu_trials_get_the_gpu_hours_over_the_clusters_gpus():
    spec = cifar10_paper(resources={"gpu": 1, "seeds_per_trial": 1})
    one = plan_study(spec, cluster=Cluster(cpus=16, gpus=1, source="here")).planned
    four = plan_study(spec, cluster=Cluster(cpus=16, gpus=4, source="here"))
    assert four.wall.source == "gpu_prior" and four.wall.prior
    assert four.planned.wall_hours == pytest.approx(one.wall_hours / 4)
    assert one.wall_hours > one.gpu_hours  # plus each trial's start


def test_gpu_trials_on_a_cluster_without_gpus_get_no_wall_time_and_the_reason():
    spec = cifar10_paper(resources={"gpu": 0.5})
    plan = plan_study(spec, cluster=CPU_ONLY)
    assert plan.planned.wall_hours is None and plan.wall.source == "none"
    assert "resources.gpu: 0.5" in plan.wall.basis[0] and "has none" in plan.wall.basis[0]
    assert plan.planned.gpu_hours is not None  # what they would take on the GPU is still known


def test_no_prior_covers_it_the_plan_gives_no_wall_time_and_says_why():
    spec = validate_spec_data(
        {
            "name": "tab",
            "dataset": "energy",
            "model": "tabular_tiny",
            "methods": ["frozen_ln", "dyt"],
            "resources": {"gpu": 0},
        }
    )
    plan = plan_study(spec, cluster=CPU_ONLY)
    assert plan.planned.wall_hours is None and plan.wall.source == "none"
    assert plan.wall.basis == [
        "no finished trial of energy with this model here, and the CPU prior covers ViT-Lite only, not tabular_tiny"
    ]
