"""The only module that talks to Ray's Jobs API: submit a study's driver, ask after it, stop it.

A study runs as a Ray job so the API process holds no driver and can restart freely. Submission ids
are derived from the study id and the driver attempt, which makes submission idempotent per attempt: a
retried submit after an API crash finds the job it already created instead of starting a second driver,
while the next attempt after a driver died is a new job.
"""

from __future__ import annotations

import logging
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["DispatchError", "JobState", "RayJobDispatcher", "submission_id_for"]

log = logging.getLogger(__name__)


class DispatchError(RuntimeError):
    """The Ray cluster could not be reached or refused the request."""


class JobState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    MISSING = "missing"  # the cluster has no record of it (e.g. the head was replaced)

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED, JobState.MISSING)


_RAY_TO_STATE = {
    "PENDING": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "SUCCEEDED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "STOPPED": JobState.STOPPED,
}


def submission_id_for(study_id: str, attempt: int = 1) -> str:
    """The Ray submission id of a study's driver attempt (the first keeps the plain study-derived id)."""
    if attempt < 1:
        raise ValueError(f"driver attempts are numbered from 1, got {attempt}")
    base = f"normlab-study-{study_id}"
    return base if attempt == 1 else f"{base}-attempt-{attempt}"


@dataclass
class RayJobDispatcher:
    """Submits `python -m workers.driver --study-id ID` to the cluster's job server.

    `dashboard_url` is the Ray dashboard / job server (http://host:8265). `auth_token` is Ray's token
    (token authentication stays on); it travels as a bearer header, never in the job's logged env.
    `driver_env` carries what the driver needs to reach the DB and MLflow from inside the cluster.
    """

    dashboard_url: str
    auth_token: str | None = None
    driver_env: Mapping[str, str] = field(default_factory=dict)
    python: str = "python"
    entrypoint_num_cpus: float = 0.0  # the driver only orchestrates: it must not take a trial's CPU

    def _client(self):  # -> JobSubmissionClient (imported lazily: ray is heavy and optional for tests)
        from ray.job_submission import JobSubmissionClient

        headers = {"Authorization": f"Bearer {self.auth_token}"} if self.auth_token else None
        try:
            return JobSubmissionClient(self.dashboard_url, headers=headers)
        except Exception as exc:  # ConnectionError, AuthenticationError, ...
            raise DispatchError(f"cannot reach the Ray job server at {self.dashboard_url}: {exc}") from exc

    def submit(self, study_id: str, spec: Mapping | None = None, *, attempt: int = 1) -> str:
        """Start the study's driver (its `attempt`-th); returns the Ray submission id. Safe to call twice."""
        job_id = submission_id_for(study_id, attempt)
        client = self._client()
        if self._job_exists(client, job_id):
            log.info("study %s already has Ray job %s; not resubmitting", study_id, job_id)
            return job_id
        entrypoint = f"{shlex.quote(self.python)} -m workers.driver --study-id {shlex.quote(study_id)}"
        try:
            client.submit_job(
                entrypoint=entrypoint,
                submission_id=job_id,
                runtime_env={"env_vars": dict(self.driver_env)},
                entrypoint_num_cpus=self.entrypoint_num_cpus,
                metadata={"normlab_study_id": study_id, "normlab_attempt": str(attempt)},
            )
        except Exception as exc:
            if self._job_exists(client, job_id):  # lost a race with another submitter: same job, fine
                return job_id
            raise DispatchError(f"Ray refused the job for study {study_id}: {exc}") from exc
        return job_id

    @staticmethod
    def _job_exists(client, job_id: str) -> bool:
        try:
            client.get_job_info(job_id)
        except Exception:
            return False
        return True

    def state(self, job_id: str) -> JobState:
        client = self._client()
        try:
            status = client.get_job_status(job_id)
        except Exception as exc:
            if "does not exist" in str(exc) or "404" in str(exc):
                return JobState.MISSING
            raise DispatchError(f"cannot read Ray job {job_id}: {exc}") from exc
        return _RAY_TO_STATE.get(str(getattr(status, "value", status)), JobState.RUNNING)

    def end_reason(self, job_id: str, state: JobState) -> str:
        """One line on how a job's driver ended, for a driver that recorded no outcome (Ray's own message)."""
        if state is JobState.MISSING:
            return f"Ray job {job_id} is unknown to the cluster (the Ray head restarted?)"
        try:
            info = self._client().get_job_info(job_id)
        except Exception as exc:
            return f"Ray job {job_id} ended {state.value} (details unavailable: {exc})"
        # Ray appends the log tail to a failed entrypoint's message; its first line says what happened.
        message = (str(info.message or "").strip().splitlines() or [""])[0].rstrip(":,. ")
        message = message.split(", last available logs")[0]
        killed_by = _killing_signal(getattr(info, "driver_exit_code", None))
        if killed_by is not None:
            message += f" (killed by {killed_by})"
        return f"Ray job {job_id} ended {state.value}" + (f": {message}" if message else "")

    def logs_tail(self, job_id: str, max_chars: int = 4000) -> str:
        try:
            return self._client().get_job_logs(job_id)[-max_chars:]
        except Exception as exc:
            return f"(logs unavailable: {exc})"

    def cancel(self, ray_job_id: str) -> None:
        """Stop the driver; Ray Tune's trials are actors of that job and stop with it."""
        client = self._client()
        try:
            client.stop_job(ray_job_id)
        except Exception as exc:
            if self._job_exists(client, ray_job_id):
                raise DispatchError(f"could not stop Ray job {ray_job_id}: {exc}") from exc


def _killing_signal(exit_code: object) -> str | None:
    """The signal that ended the entrypoint: -N from Python, 128 + N from the shell Ray runs it in."""
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        return None
    number = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code <= 128 + 64 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
