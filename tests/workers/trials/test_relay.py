"""Under a real local Ray Tune, CPU trials train on the node's warm trial hosts, which outlive the Tune
experiment that started them: the next experiment (the next study) finds them warm."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.stack.processes import wait_until
from tests.workers.trials.trial_configs import TINY_TRIAL

CONFIG = {**TINY_TRIAL, "study_id": "study-relay", "phase": "final"}


def relayed_trial(config: dict) -> None:
    """A Tune trial that must train on a host: it fails if none took it."""
    from workers.trials.relay import run_on_trial_host

    config = dict(config)
    log = Path(config.pop("test_log"))
    train_ahead = config.pop("test_train_ahead", False)
    assert run_on_trial_host(config, train_ahead=train_ahead), "no warm trial host took the trial"
    with log.open("a") as handle:
        handle.write(f"{config['seed']} {os.getpid()}\n")


def _hosts() -> dict[str, dict]:
    import ray

    from workers.trials.relay import HOST_NAMESPACE

    names = [
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == HOST_NAMESPACE
    ]
    return {name: ray.get(ray.get_actor(name, namespace=HOST_NAMESPACE).state.remote()) for name in names}


def _experiment(
    tmp_path: Path,
    name: str,
    seeds: list[int],
    *,
    one_at_a_time: bool = False,
    train_ahead: bool = False,
    callbacks: list | None = None,
):
    from ray import tune

    return tune.Tuner(
        tune.with_resources(relayed_trial, {"cpu": 1}),
        param_space={
            **CONFIG,
            "seed": tune.grid_search(seeds),
            "trial_key": tune.sample_from(lambda spec: f"study-relay/{name}/seed{spec.config.seed}"),
            "test_log": str(tmp_path / f"{name}.log"),
            "test_train_ahead": train_ahead,
        },
        tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=1 if one_at_a_time else None),
        run_config=tune.RunConfig(
            name=name, storage_path=str(tmp_path / "ray_results"), verbose=0, callbacks=callbacks
        ),
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


@pytest.mark.slow
def test_trials_that_train_ahead_report_every_epoch_once_in_order_with_its_own_checkpoint(
    ray_cluster, tmp_path
):
    from ray.tune import Callback

    from workers.training import CHECKPOINT_FILE, load_checkpoint

    reported: dict[str, list[int]] = {}

    class Reports(Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            reported.setdefault(trial.trial_id, []).append(result["epoch"])

    results = _experiment(tmp_path, "ahead", [0, 1, 2], train_ahead=True, callbacks=[Reports()])
    assert results.num_errors == 0
    assert sorted(reported.values()) == [[0, 1, 2]] * 3
    for result in results:
        with result.checkpoint.as_directory() as directory:
            assert load_checkpoint(Path(directory) / CHECKPOINT_FILE)["epoch"] == 2


@pytest.mark.slow
def test_a_host_that_died_is_replaced_and_the_next_study_trains_on_hosts_again(ray_cluster, tmp_path):
    import ray

    from workers.trials.relay import HOST_NAMESPACE

    assert _experiment(tmp_path, "before", [0, 1]).num_errors == 0
    before = _hosts()
    victim = sorted(before)[0]
    ray.kill(ray.get_actor(victim, namespace=HOST_NAMESPACE))

    after = _experiment(tmp_path, "after", [2, 3], one_at_a_time=True)
    assert after.num_errors == 0  # relayed_trial fails a trial that no host took
    replaced = _hosts()
    assert sorted(replaced) == sorted(before) and replaced[victim]["pid"] != before[victim]["pid"]
    assert (
        sum(state["trials"] for state in replaced.values())
        == sum(s["trials"] for s in before.values()) + 2 - before[victim]["trials"]
    )


@pytest.mark.slow
def test_a_relay_that_knew_a_dead_host_passes_it_over_and_starts_a_new_one(ray_cluster):
    import ray

    from workers.trials.relay import claim_trial_host

    node = ray.get_runtime_context().get_node_id()
    first = claim_trial_host("first", node, 1.0)
    assert first is not None
    first_pid = ray.get(first.state.remote())["pid"]
    first.release.remote("first")
    ray.kill(first)
    # ray.kill returns before the actor is gone; a claim in between meets a dying host that still answers
    # (the relay's start then fails and the trial trains in its own process). This test is about a dead one.
    assert wait_until(lambda: _is_dead(first), timeout=30)

    second = claim_trial_host("second", node, 1.0)  # the dead host is tried first: it used it last
    assert second is not None and ray.get(second.state.remote())["pid"] != first_pid
    second.release.remote("second")
    third = claim_trial_host("third", node, 1.0)  # the dead one's replacement, once it is up, or the other
    assert third is not None and ray.get(third.state.remote())["pid"] != first_pid


def _is_dead(host) -> bool:  # type: ignore[no-untyped-def]
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    try:
        ray.get(host.state.remote(), timeout=5)
    except RayActorError:
        return True
    except GetTimeoutError:
        return False
    return False


class HostOfAnOlderRelease:
    """A host started before `start` took `train_ahead` (hosts outlive a service restarted on a head it did
    not start): its claim works, its start does not."""

    def claim(self, token: str) -> bool:
        return True

    def release(self, token: str) -> None:
        pass

    def start(self, token, config, restored_dir, num_threads, relay_pid, relay_started_at) -> None:
        pass


class HostBeforeCheckpointIntervals(HostOfAnOlderRelease):
    """A host started before `start` took the checkpoint interval: its TrainConfig would refuse the
    interval as an unknown config key, so it must never receive one."""

    def start(
        self, token, config, restored_dir, num_threads, relay_pid, relay_started_at, train_ahead
    ) -> None:
        pass


@pytest.mark.slow
@pytest.mark.parametrize("older_host", [HostOfAnOlderRelease, HostBeforeCheckpointIntervals])
def test_a_host_that_cannot_start_the_trial_leaves_it_to_its_own_process(ray_cluster, older_host):
    import ray

    from workers.trials.relay import relay

    host = ray.remote(older_host).options(num_cpus=0).remote()
    assert ray.get(host.claim.remote("old"))
    config = {**CONFIG, "seed": 0, "checkpoint_every_s": 10.0}
    assert relay(host, "old", config, num_threads=1, train_ahead=True) is False


def switched_off_trial(config: dict) -> None:
    from workers.trials.relay import run_on_trial_host

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


@pytest.mark.slow
def test_a_host_with_nothing_to_do_ends_itself(ray_cluster):
    import time

    import ray
    from ray.exceptions import RayActorError

    from workers.trials.host import TrialHost

    host = ray.remote(TrialHost).options(num_cpus=0, max_concurrency=4).remote(idle_exit_s=1.0)
    assert ray.get(host.state.remote(), timeout=120)["busy"] is False
    deadline = time.monotonic() + 60
    with pytest.raises(RayActorError):
        while time.monotonic() < deadline:
            ray.get(host.state.remote(), timeout=10)
            time.sleep(0.5)
