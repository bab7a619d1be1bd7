"""Under a real local Ray Tune, CPU trials train on the node's warm trial hosts, which outlive the Tune
experiment that started them: the next experiment (the next study) finds them warm."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CONFIG = {
    "method": "frozen_ln",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "epochs": 2,
    "batch_size": 32,
    "lr": 3e-3,
    "warmup_epochs": 1,
    "max_steps_per_epoch": 2,
    "study_id": "study-relay",
    "phase": "final",
}


def relayed_trial(config: dict) -> None:
    """A Tune trial that must train on a host: it fails if none took it."""
    from workers.trial_relay import run_on_trial_host

    config = dict(config)
    log = Path(config.pop("test_log"))
    assert run_on_trial_host(config), "no warm trial host took the trial"
    with log.open("a") as handle:
        handle.write(f"{config['seed']} {os.getpid()}\n")


def _hosts() -> dict[str, dict]:
    import ray

    from workers.trial_relay import HOST_NAMESPACE

    names = [
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == HOST_NAMESPACE
    ]
    return {name: ray.get(ray.get_actor(name, namespace=HOST_NAMESPACE).state.remote()) for name in names}


def _experiment(tmp_path: Path, name: str, seeds: list[int]):
    from ray import tune

    return tune.Tuner(
        tune.with_resources(relayed_trial, {"cpu": 1}),
        param_space={
            **CONFIG,
            "seed": tune.grid_search(seeds),
            "trial_key": tune.sample_from(lambda spec: f"study-relay/{name}/seed{spec.config.seed}"),
            "test_log": str(tmp_path / f"{name}.log"),
        },
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(name=name, storage_path=str(tmp_path / "ray_results"), verbose=0),
    ).fit()


@pytest.mark.slow
def test_cpu_trials_of_consecutive_experiments_train_on_the_same_warm_hosts(ray_cluster, tmp_path):
    first = _experiment(tmp_path, "first", [0, 1, 2])
    assert first.num_errors == 0
    assert sorted(r.metrics["epoch"] for r in first) == [2, 2, 2]
    after_first = _hosts()
    # One host per CPU of the 2-CPU node, and together they trained the three trials.
    assert len(after_first) == 2
    assert sum(state["trials"] for state in after_first.values()) == 3

    second = _experiment(tmp_path, "second", [3, 4])
    assert second.num_errors == 0
    after_second = _hosts()
    assert {name: state["pid"] for name, state in after_second.items()} == {
        name: state["pid"] for name, state in after_first.items()
    }
    assert sum(state["trials"] for state in after_second.values()) == 5
    # The Tune trials only relayed: none of their processes is a host's.
    relay_pids = {int(line.split()[1]) for line in (tmp_path / "second.log").read_text().splitlines()}
    assert relay_pids.isdisjoint(state["pid"] for state in after_second.values())


def switched_off_trial(config: dict) -> None:
    from workers.trial_relay import run_on_trial_host

    os.environ["NORMLAB_TRIAL_HOSTS"] = "0"  # as the job's environment sets it for its trial processes
    assert run_on_trial_host(dict(config)) is False


@pytest.mark.slow
def test_switched_off_hosts_take_no_trial_and_none_is_started(ray_cluster, tmp_path):
    from ray import tune

    results = tune.Tuner(
        tune.with_resources(switched_off_trial, {"cpu": 1}),
        param_space={**CONFIG, "seed": 0, "trial_key": "off"},
        run_config=tune.RunConfig(name="off", storage_path=str(tmp_path / "ray_results"), verbose=0),
    ).fit()
    assert results.num_errors == 0
    assert _hosts() == {}
