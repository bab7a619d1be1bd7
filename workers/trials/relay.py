"""The Tune side of warm trial hosts (workers.trials.host): claim a free host on this node, hand it the
trial, relay its reports to Tune. Torch-free: a Tune trial that relays stays a light process."""

from __future__ import annotations

import logging
import math
import os
import time
import uuid
from pathlib import Path
from typing import Any

from studies.trial_config import Key, checkpoint_every_s_of
from workers.settings import WorkerSettings
from workers.trials.host import HostEvent, TrialHost, process_started_at
from workers.trials.plan import trials_run_on_cpu
from workers.trials.tune_context import report_to_tune, restored_checkpoint, trial_resources

__all__ = [
    "CLAIM_TIMEOUT_S",
    "HOST_NAMESPACE",
    "host_name",
    "run_on_trial_host",
    "trial_host",
    "warm_trial_hosts",
    "warm_trial_hosts_for_study",
]

log = logging.getLogger(__name__)

HOST_NAMESPACE = "normlab-trial-hosts"
# A host being created first imports torch and the training code: seconds on a busy laptop, more on a
# loaded node. A claim that takes longer gives up on that host (the trial then trains in its own process).
CLAIM_TIMEOUT_S = 120.0
EVENT_WAIT_S = 5.0  # one next_event call waits this long for the host's next report
CLOSE_WAIT_S = 60.0  # after Tune stopped a trial: how long the relay waits for the host to close its runs


def host_name(node_id: str, index: int) -> str:
    return f"trial-host-{node_id}-{index}"


def trial_host(node_id: str, index: int):
    """The handle of host `index` on node `node_id`, created (without waiting for it) when it does not exist.
    A host created here exits after NORMLAB_WARM_IDLE_S without a trial (the study's setting, which its
    driver and trial processes are given)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return (
        ray.remote(TrialHost)
        .options(
            name=host_name(node_id, index),
            namespace=HOST_NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,  # the Tune trial it serves holds the CPUs
            max_concurrency=4,  # a trial's thread, its relay's calls, and a claim from another relay
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        )
        .remote(WorkerSettings.from_env().warm_idle_s)
    )


def node_slots(node_id: str, cpus_per_trial: float) -> int:
    """How many trials of `cpus_per_trial` CPUs can run at once on the node: its number of hosts."""
    import ray

    return next((_slots(node, cpus_per_trial) for node in ray.nodes() if node.get("NodeID") == node_id), 0)


def _slots(node: dict[str, Any], cpus_per_trial: float) -> int:
    if not node.get("Alive"):
        return 0
    return math.floor(float(node.get("Resources", {}).get("CPU", 0.0)) / max(cpus_per_trial, 1e-9))


def warm_trial_hosts(cpus_per_trial: float) -> list:
    """The hosts of every node, created where missing (without waiting for them)."""
    import ray

    return [
        trial_host(node["NodeID"], index)
        for node in ray.nodes()
        for index in range(_slots(node, cpus_per_trial))
    ]


def warm_trial_hosts_for_study(*, cpus_per_trial: float, gpu: float | str) -> None:
    """A study's driver calls this at its start: when its trials run on CPUs, the hosts warm up (or are
    found warm) while Tune gets going. Best-effort: trials can always train in their own processes."""
    import ray

    if not WorkerSettings.from_env().trial_hosts:
        return
    if not trials_run_on_cpu(gpu, cluster_gpus=ray.cluster_resources().get("GPU", 0.0)):
        return
    try:
        hosts = warm_trial_hosts(cpus_per_trial)
    except Exception as exc:
        log.warning("could not start the warm trial hosts: %s", exc)
        return
    log.info("study trials run on warm trial hosts (%d across the cluster)", len(hosts))


def run_on_trial_host(config: dict[str, Any], *, train_ahead: bool = False) -> bool:
    """Train this Tune trial on a warm host of its node. False, with nothing done, when hosts are switched
    off (NORMLAB_TRIAL_HOSTS=0), the trial has a GPU, or no host can take it: the caller then trains it in
    its own process. `train_ahead`: no scheduler can stop the trial early, so the host may train its next
    epoch while Tune takes a report (workers.trials.host)."""
    import ray

    if not ray.is_initialized() or not WorkerSettings.from_env().trial_hosts:
        return False
    resources = trial_resources()
    if not resources or resources.get("GPU", 0.0) > 0:
        return False
    cpus = float(resources.get("CPU", 1.0))
    token = f"{config.get(Key.TRIAL_KEY, 'trial')}#{uuid.uuid4().hex[:8]}"
    host = claim_trial_host(token, ray.get_runtime_context().get_node_id(), cpus)
    if host is None:
        return False
    return relay(host, token, config, num_threads=max(1, int(cpus)), train_ahead=train_ahead)


# Per relay process (Tune hands it trial after trial): the node's hosts, found once, and the one it used last,
# which is free again when this process gets its next trial.
_known_hosts: dict[tuple[str, float], list[Any]] = {}
_last_host: dict[tuple[str, float], int] = {}


def claim_trial_host(token: str, node_id: str, cpus_per_trial: float):
    """The first host of the node that takes `token` (the one this process used last tried first); None
    when every one is busy or cannot be reached."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    key = (node_id, cpus_per_trial)
    if key not in _known_hosts:
        # Every handle at once, so that missing hosts are created side by side rather than one after another.
        _known_hosts[key] = [
            trial_host(node_id, index) for index in range(node_slots(node_id, cpus_per_trial))
        ]
    hosts = _known_hosts[key]
    last = _last_host.get(key, 0)
    for index in sorted(range(len(hosts)), key=lambda i: i != last):
        try:
            if ray.get(hosts[index].claim.remote(token), timeout=CLAIM_TIMEOUT_S):
                _last_host[key] = index
                return hosts[index]
        except RayActorError as exc:
            log.warning("trial host %d is gone (%s); starting a new one for later trials", index, exc)
            hosts[index] = trial_host(node_id, index)  # the dead host's name is free again
        except GetTimeoutError as exc:
            log.warning("trial host %d did not answer (%s); trying the next one", index, exc)
    return None


def relay(host, token: str, config: dict[str, Any], *, num_threads: int, train_ahead: bool = False) -> bool:
    """Run the claimed trial on `host`, passing each report to Tune and Tune's answer back. False, with
    nothing trained, when the host cannot start it (it died since the claim, or it runs older code that
    does not take this call: hosts outlive a service restarted on a head it did not start)."""
    import ray

    # The checkpoint interval travels as an argument of its own, not in the config: a host running code from
    # before the interval existed then refuses the call (and the trial trains in this process) instead of
    # failing on a config key it does not know.
    trial_config = {k: v for k, v in config.items() if k != Key.CHECKPOINT_EVERY_S}
    checkpoint_every_s = checkpoint_every_s_of(config)
    with restored_checkpoint() as restored:
        try:
            ray.get(
                host.start.remote(
                    token,
                    trial_config,
                    str(restored) if restored is not None else None,
                    num_threads,
                    os.getpid(),
                    process_started_at(os.getpid()),
                    train_ahead,
                    checkpoint_every_s,
                )
            )
        except Exception as exc:
            log.warning("trial host could not start %s (%s); the trial trains in its own process", token, exc)
            host.release.remote(token)
            return False
        except BaseException:
            host.release.remote(token)
            raise
        while True:
            event: HostEvent = ray.get(host.next_event.remote(token, EVENT_WAIT_S))
            if event.kind == "waiting":
                continue
            if event.kind == "finished":
                return True
            if event.kind == "failed":
                assert event.error is not None
                raise event.error
            assert event.metrics is not None
            try:
                report_to_tune(event.metrics, Path(event.checkpoint_dir) if event.checkpoint_dir else None)
            except BaseException:  # Tune stopped the trial (SystemExit), or this process is going down
                host.resume.remote(token, True)
                _wait_until_closed(host, token)
                raise
            host.resume.remote(token, False)


def _wait_until_closed(host, token: str) -> None:
    """Wait (bounded) for the host to end a stopped trial, which closes its MLflow runs as an in-process
    trial would before Tune hands this process the next one."""
    import ray

    deadline = time.monotonic() + CLOSE_WAIT_S
    while time.monotonic() < deadline:
        try:
            event: HostEvent = ray.get(host.next_event.remote(token, EVENT_WAIT_S))
        except Exception:
            return
        if event.kind in ("finished", "failed"):
            return
        if event.kind == "report":  # reported before it saw the stop: it stops at once
            host.resume.remote(token, True)
