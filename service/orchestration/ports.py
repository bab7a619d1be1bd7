"""What the service needs from the cluster side: the Dispatcher protocol, the job states it answers and the
errors it raises (service.orchestration.dispatcher implements it on Ray's Jobs API; tests use fakes).

The routes (cancel) and the reconcile loop (service.orchestration.reconcile) depend on this protocol only. Its errors
keep apart the two answers that mean opposite things to a caller:

- `JobNotFoundError`: the cluster answered and has no such job. Nothing of it runs (the head was replaced,
  or the job was never created), so stopping it is already done.
- `ClusterUnreachableError`: the cluster did not answer (connection refused, timeout, a 5xx). Nothing is
  known about the job; it may be running on. A caller must not take this for "stopped" or "gone".
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ClusterUnreachableError",
    "DispatchError",
    "Dispatcher",
    "JobNotFoundError",
    "JobServerProbe",
    "JobState",
]


class DispatchError(RuntimeError):
    """The cluster could not do what was asked (unreachable, refused the request, or has no such job)."""


class ClusterUnreachableError(DispatchError):
    """The cluster's job server did not answer; the job's fate is unknown."""


class JobNotFoundError(DispatchError):
    """The cluster answered and has no job with this id."""

    def __init__(self, job_id: str, detail: str = "") -> None:
        self.job_id = job_id
        super().__init__(f"the cluster has no job {job_id}" + (f" ({detail})" if detail else ""))


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


@runtime_checkable
class Dispatcher(Protocol):
    """Runs a study's driver as a cluster job, reports on it and stops it.

    Every method raises `DispatchError` (or a subclass) when it cannot answer, never another exception;
    `ClusterUnreachableError` when the cluster did not answer at all.
    """

    def submit(self, study_id: str, spec: Mapping[str, Any] | None = None, *, attempt: int = 1) -> str:
        """Start the study's `attempt`-th driver; returns the cluster's job id. Idempotent per attempt:
        a second call for the same attempt returns the job the first created."""
        ...

    def state(self, job_id: str) -> JobState:
        """The job's state; `JobState.MISSING` when the cluster answered and has no such job."""
        ...

    def end_reason(self, job_id: str, state: JobState) -> str:
        """One line on how an ended job ended (best effort: never raises)."""
        ...

    def logs_tail(self, job_id: str, max_chars: int = 4000) -> str:
        """The end of the job's logs (best effort: never raises)."""
        ...

    def cancel(self, job_id: str) -> None:
        """Stop the job and its trials. Returns once the cluster took the request, or when nothing of the
        job runs: a job that already ended, or one the cluster has no record of, is not an error. Raises
        `ClusterUnreachableError` when the cluster did not answer (the job may still run) and
        `DispatchError` when it refused."""
        ...


@runtime_checkable
class JobServerProbe(Protocol):
    """Says whether the cluster's job server would take a job now, without starting one (readiness asks)."""

    def probe(self) -> str:
        """One line on what answered when the job server would take a job. Raises `DispatchError` with the
        server's own words when it would not (`ClusterUnreachableError` when it did not answer)."""
        ...
