"""Warm trial hosts: long-lived processes, one per CPU slot of a node, that train CPU trials for any study.

A trial process that Tune starts pays seconds before its first step: importing torch, MLflow and the
training code, loading its dataset, building torch's first optimizer (which imports torch._dynamo). Tune
reuses its trial processes within one study (reuse_actors) but starts new ones for every study. A
TrialHost is a detached Ray actor that outlives studies with all of that loaded. The Tune trial, now a
light process, claims a free host on its own node, hands it the trial and relays the host's epoch reports
to Tune (workers.trials.relay): Tune still schedules, stops, retries and checkpoints the trial as before.

Only CPU trials use hosts: a GPU trial needs the device Ray assigned to its own process, and a host holding
a CUDA context between studies would keep GPU memory from other work.

Relay and host talk in four calls: `claim(token)` (False while the host has another trial), `start(...)`,
`next_event(token)` and `resume(token, stop)`, which lets the trial continue after Tune took its report (a
report's checkpoint directory stays untouched until then, as under `tune.report`). A trial that no scheduler
can stop early (`train_ahead`) trains its next epoch while Tune takes its report, and waits for Tune's answer
only before it writes or reports anything of that epoch: the driver's round trip then costs the trial
nothing. Nothing of the epoch trained ahead is written or logged before Tune has let the trial go on. A relay
that dies (its Tune trial was killed, or its study cancelled) is noticed at the trial's next report: the host
stops that trial, its MLflow runs closed as KILLED (Tune's retry reopens them; a trial lost with a killed
driver keeps that status, as the README says), and frees itself. A host with nothing to do for `idle_exit_s`
ends itself, giving its memory back.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studies.trial_config import Key
from workers.trials.stop import TrialGone

__all__ = [
    "CLAIM_START_S",
    "RELAY_CHECK_S",
    "HostEvent",
    "TrialHost",
    "process_started_at",
]

log = logging.getLogger(__name__)

RELAY_CHECK_S = 1.0  # while a report waits for Tune, how often the host checks that its relay still runs
CLAIM_START_S = 30.0  # a claim never followed by start() (its relay died in between) expires after this


@dataclass(frozen=True)
class HostEvent:
    """What the relay gets from `next_event`: a report, the trial's end, or nothing yet."""

    kind: str  # "report" | "finished" | "failed" | "waiting"
    metrics: dict[str, Any] | None = None
    checkpoint_dir: str | None = None
    error: BaseException | None = None


def process_started_at(pid: int) -> float | None:
    """The start time of process `pid` (None: no such process); with the pid it names one process even
    after the pid is reused."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@dataclass
class _HostedTrial:
    token: str
    claimed_at: float = field(default_factory=time.monotonic)
    relay_pid: int | None = None
    relay_started_at: float | None = None
    events: queue.Queue[HostEvent] = field(default_factory=queue.Queue)
    resumes: queue.Queue[bool] = field(default_factory=queue.Queue)  # True: stop the trial
    thread: threading.Thread | None = None
    orphaned: bool = False
    train_ahead: bool = False  # send() returns at once; settle() waits for Tune's answer
    unanswered: bool = False  # a report Tune has not answered yet

    def relay_alive(self) -> bool:
        if self.relay_pid is None:
            return True
        return process_started_at(self.relay_pid) == self.relay_started_at

    def send(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        """The training thread's report: hand it to the relay, then (unless the trial trains ahead) wait
        until Tune has taken it."""
        self.events.put(
            HostEvent(
                "report",
                metrics=dict(metrics),
                checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
            )
        )
        self.unanswered = True
        if not self.train_ahead:
            self.settle()

    def settle(self) -> None:
        """Wait until Tune has answered the last report; SystemExit when it stopped the trial, or when the
        Tune trial is gone."""
        if not self.unanswered:
            return
        self.unanswered = False
        while True:
            try:
                stop = self.resumes.get(timeout=RELAY_CHECK_S)
            except queue.Empty:
                if self.relay_alive():
                    continue
                self.orphaned = True
                raise TrialGone("the Tune trial this host was training for is gone") from None
            if stop:
                raise SystemExit(0)  # what tune.report raises when Tune stops a trial
            return


class TrialHost:
    """A warm trial process (see module docstring); created through workers.trials.relay.trial_host."""

    def __init__(self, idle_exit_s: float) -> None:
        """`idle_exit_s`: seconds without a trial before the host exits (0: it stays); the relay passes
        NORMLAB_WARM_IDLE_S, as a host keeps ~0.7 GB (torch, the datasets it loaded)."""
        warm_up()
        self._lock = threading.Lock()
        self._current: _HostedTrial | None = None
        self._undelivered: dict[str, _HostedTrial] = {}  # trials whose last event the relay has not taken
        self._idle_since = time.monotonic()
        self._closing = False
        self._trials_run = 0
        if idle_exit_s > 0:
            threading.Thread(
                target=self._exit_when_idle, args=(idle_exit_s,), name="idle-exit", daemon=True
            ).start()

    def state(self) -> dict[str, Any]:
        """This host's process id, whether it has a trial, and how many trials it has trained."""
        with self._lock:
            return {"pid": os.getpid(), "busy": self._current is not None, "trials": self._trials_run}

    def release(self, token: str) -> None:
        """Give back a claim that was not started (a relay that could not start its trial)."""
        with self._lock:
            if self._current is not None and self._current.token == token and self._current.thread is None:
                self._current = None
                self._undelivered.pop(token, None)

    def claim(self, token: str) -> bool:
        with self._lock:
            current = self._current
            if (
                current is not None
                and current.thread is None
                and time.monotonic() - current.claimed_at > CLAIM_START_S
            ):
                self._undelivered.pop(current.token, None)  # claimed by a relay that never started it
                current = None
            if current is not None or self._closing:
                return False
            self._current = _HostedTrial(token)
            self._undelivered[token] = self._current
            return True

    def start(
        self,
        token: str,
        config: dict[str, Any],
        restored_dir: str | None,
        num_threads: int,
        relay_pid: int,
        relay_started_at: float | None,
        train_ahead: bool = False,
        checkpoint_every_s: float = 0.0,
    ) -> None:
        config = {**config, Key.CHECKPOINT_EVERY_S: checkpoint_every_s}  # run_trial reads it from there
        with self._lock:
            trial = self._current
            if trial is None or trial.token != token or trial.thread is not None:
                raise RuntimeError(f"trial host: {token} holds no claim here")
            trial.relay_pid, trial.relay_started_at = relay_pid, relay_started_at
            trial.train_ahead = train_ahead
            trial.thread = threading.Thread(
                target=self._train,
                args=(trial, config, Path(restored_dir) if restored_dir else None, num_threads),
                name=f"trial {token}",
                daemon=True,
            )
        trial.thread.start()

    def next_event(self, token: str, timeout_s: float) -> HostEvent:
        trial = self._undelivered.get(token)
        if trial is None:
            return HostEvent("failed", error=RuntimeError(f"trial host: no trial {token} here"))
        try:
            event = trial.events.get(timeout=timeout_s)
        except queue.Empty:
            return HostEvent("waiting")
        if event.kind != "report":
            self._undelivered.pop(token, None)
        return event

    def resume(self, token: str, stop: bool) -> None:
        trial = self._undelivered.get(token)
        if trial is not None:
            trial.resumes.put(stop)

    def _train(
        self, trial: _HostedTrial, config: dict[str, Any], restored: Path | None, num_threads: int
    ) -> None:
        from workers.trials.trainable import run_trial

        try:
            run_trial(
                config,
                device="cpu",
                num_threads=num_threads,
                restored=restored,
                send=trial.send,
                settle=trial.settle,
            )
        except SystemExit:
            trial.events.put(HostEvent("finished"))  # stopped by Tune (or orphaned: nobody is listening)
        except BaseException as error:
            trial.events.put(HostEvent("failed", error=_portable(error)))
        else:
            trial.events.put(HostEvent("finished"))
        finally:
            with self._lock:
                if trial.orphaned:
                    log.warning("trial %s stopped: the Tune trial it was trained for is gone", trial.token)
                if trial.orphaned or not trial.relay_alive():  # nobody will ask for its last event
                    self._undelivered.pop(trial.token, None)
                self._trials_run += 1
                if self._current is trial:
                    self._current = None
                    self._idle_since = time.monotonic()

    def _exit_when_idle(self, idle_exit_s: float) -> None:
        while True:
            time.sleep(min(idle_exit_s, 10.0))
            with self._lock:
                idle = self._current is None and not self._undelivered
                if not idle or time.monotonic() - self._idle_since < idle_exit_s:
                    continue
                self._closing = True  # claims are refused from here on
            import ray

            log.info("trial host idle for %.0f s: exiting", idle_exit_s)
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
            return


def warm_up() -> None:
    """Pay once what every trial process pays before its first step."""
    import torch

    import workers.trials.trainable  # noqa: F401  torch, MLflow and the training code
    from workers.tracking.deadline import MLFLOW_REQUEST_LIMITS

    for name, value in MLFLOW_REQUEST_LIMITS.items():
        os.environ.setdefault(name, value)  # as in a Tune trial process; an operator's own setting wins
    # torch.optim's first optimizer imports torch._dynamo, about a second on a laptop core.
    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])


def _portable(error: BaseException) -> BaseException:
    """The error, with the host's traceback as a note, when it survives pickling (the relay raises it in
    the Tune trial); else a RuntimeError carrying its text and traceback."""
    import traceback

    from ray import cloudpickle

    where = "on its warm trial host:\n" + "".join(traceback.format_exception(error))
    add_note = getattr(error, "add_note", None)  # Python 3.11 and newer
    try:
        if add_note is None:
            raise TypeError("no notes before Python 3.11")
        add_note(where)
        cloudpickle.loads(cloudpickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error} {where}")
