"""The only module that talks to Ray's Jobs API: submit a study's driver, ask after it, stop it.

A study runs as a Ray job so the API process holds no driver and can restart freely. Submission ids
are derived from the study id and the driver attempt, which makes submission idempotent per attempt: a
retried submit after an API crash finds the job it already created instead of starting a second driver,
while the next attempt after a driver died is a new job.

RayJobDispatcher implements service.orchestration.ports.Dispatcher. Ray's client reports both "no such job" and "no
answer" as exceptions (a 404 RuntimeError; a ConnectionError, a timeout or a 5xx); `_classified` turns them
into JobNotFoundError and ClusterUnreachableError, so that an outage is never read as a job that is gone.

It also implements JobServerProbe for readiness. Ray's job server answering is not enough: it hands every
submission to the head's dashboard agent, and a head whose agent has no HTTP server (it could not bind its
port) lists jobs, answers its version, and refuses every job after a 10 s wait. So the probe submits a job
the agent itself must refuse before it records anything (a malformed label selector), which walks the
whole path a study's submission takes and starts nothing.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shlex
import signal
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from normlab.loading import PluginSource, write_package
from service.orchestration.ports import ClusterUnreachableError, DispatchError, JobNotFoundError, JobState

__all__ = [
    "PROBE_SUBMISSION_ID",
    "ClusterUnreachableError",
    "DispatchError",
    "JobNotFoundError",
    "JobState",
    "RayJobDispatcher",
    "condensed",
    "ray_words",
    "submission_id_for",
]

log = logging.getLogger(__name__)

_RAY_TO_STATE = {
    "PENDING": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "SUCCEEDED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "STOPPED": JobState.STOPPED,
}

# How ray.job_submission reports an answer that is not 200: RuntimeError("Request failed with status code
# N: <body>."); the job server answers 404 "Job <id> does not exist" for an unknown job.
_STATUS_CODE = re.compile(r"status code (\d{3})")


# The readiness probe's submission (service.orchestration.readiness): a job Ray's job agent refuses for its
# label selector, which no Ray label value may spell. Named, so that a Ray release that took it (it would
# wait forever for a node with that label) shows what it is, and stops it at once (RayJobDispatcher.probe).
PROBE_SUBMISSION_ID = "normlab-readiness-probe"
_PROBE_LABEL_SELECTOR = {"normlab-readiness-probe": "!!"}
# What the agent says when it refused the probe: its label selector check, or, for a probe it once took,
# that the id exists. Either way the request went through the agent that starts every job.
_PROBE_REFUSED_BY_AGENT = ("label selector", "already exists")
_PROBE_TIMEOUT_S = 15.0  # Ray's job server waits up to 10 s for an agent before it says there is none


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
            # The constructor already asks the job server for its version: an unreachable one fails here.
            return JobSubmissionClient(self.dashboard_url, headers=headers)
        except Exception as exc:  # ConnectionError, AuthenticationError, ...
            raise _classified(exc, doing=f"cannot reach the Ray job server at {self.dashboard_url}") from exc

    def submit(self, study_id: str, spec: Mapping | None = None, *, attempt: int = 1) -> str:
        """Start the study's driver (its `attempt`-th); returns the Ray submission id. Safe to call twice."""
        job_id = submission_id_for(study_id, attempt)
        client = self._client()
        if self._job_exists(client, job_id):
            log.info("study %s already has Ray job %s; not resubmitting", study_id, job_id)
            return job_id
        entrypoint = f"{shlex.quote(self.python)} -m workers.driver --study-id {shlex.quote(study_id)}"
        try:
            with shipped_plugins(spec) as py_modules:
                client.submit_job(
                    entrypoint=entrypoint,
                    submission_id=job_id,
                    runtime_env=_runtime_env(self.driver_env, py_modules),
                    entrypoint_num_cpus=self.entrypoint_num_cpus,
                    metadata={"normlab_study_id": study_id, "normlab_attempt": str(attempt)},
                )
        except Exception as exc:
            if self._job_exists(client, job_id):  # lost a race with another submitter: same job, fine
                return job_id
            raise _classified(exc, doing=f"Ray refused the job for study {study_id}") from exc
        return job_id

    @staticmethod
    def _job_exists(client, job_id: str) -> bool:
        """Whether the cluster holds the job; raises when it cannot tell (unreachable, refused)."""
        try:
            client.get_job_info(job_id)
        except Exception as exc:
            error = _classified(exc, job_id=job_id, doing=f"cannot look up Ray job {job_id}")
            if isinstance(error, JobNotFoundError):
                return False
            raise error from exc
        return True

    def state(self, job_id: str) -> JobState:
        client = self._client()
        try:
            status = client.get_job_status(job_id)
        except Exception as exc:
            error = _classified(exc, job_id=job_id, doing=f"cannot read Ray job {job_id}")
            if isinstance(error, JobNotFoundError):
                return JobState.MISSING
            raise error from exc
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

    def probe(self, timeout_s: float = _PROBE_TIMEOUT_S) -> str:
        """Whether the job server would take a study's job now: submits one that the head's job agent checks
        and refuses (module docstring). Returns a line on what answered; raises ClusterUnreachableError when
        the job server did not answer or cannot reach its agent, DispatchError when it refuses us."""
        url = f"{self.dashboard_url.rstrip('/')}/api/jobs/"
        request = {
            "entrypoint": "true",
            "submission_id": PROBE_SUBMISSION_ID,
            "entrypoint_label_selector": _PROBE_LABEL_SELECTOR,
        }
        try:
            answer = httpx.post(url, json=request, headers=self._headers(), timeout=timeout_s)
        except httpx.TimeoutException:
            raise ClusterUnreachableError(
                f"the Ray job server at {self.dashboard_url} took no job within {timeout_s:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise ClusterUnreachableError(
                f"the Ray job server at {self.dashboard_url} did not answer ({type(exc).__name__}: {exc})"
            ) from None
        words = ray_words(answer.text)
        if any(sign in answer.text for sign in _PROBE_REFUSED_BY_AGENT):
            return f"the Ray job server at {self.dashboard_url} takes jobs (its job agent answered)"
        if answer.status_code == 200:
            # A Ray release that accepts the selector: the job would wait forever for a matching node.
            self._stop_probe_job()
            return f"the Ray job server at {self.dashboard_url} takes jobs"
        if answer.status_code in (401, 403):
            raise DispatchError(
                f"the Ray job server at {self.dashboard_url} refuses this stack's Ray token "
                f"(HTTP {answer.status_code}: {words})"
            )
        if answer.status_code == 400:
            # The head refused the request's form before asking its agent (a Ray release that checks label
            # selectors itself, or knows none): it answers, and whether its agent does is not known.
            return f"the Ray job server at {self.dashboard_url} answers (its job agent was not asked)"
        raise ClusterUnreachableError(
            f"the Ray job server at {self.dashboard_url} takes no job (HTTP {answer.status_code}: {words})"
        )

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.auth_token}"} if self.auth_token else {}

    def _stop_probe_job(self) -> None:
        try:
            httpx.post(
                f"{self.dashboard_url.rstrip('/')}/api/jobs/{PROBE_SUBMISSION_ID}/stop",
                headers=self._headers(),
                timeout=_PROBE_TIMEOUT_S,
            )
        except httpx.HTTPError as exc:
            log.warning("could not stop Ray job %s: %s", PROBE_SUBMISSION_ID, exc)

    def cancel(self, job_id: str) -> None:
        """Stop the driver; Ray Tune's trials are actors of that job and stop with it. A job the cluster
        has no record of is stopped already; an unanswered request raises ClusterUnreachableError."""
        client = self._client()
        try:
            client.stop_job(job_id)  # False for a job that already ended: nothing to stop, fine
        except Exception as exc:
            error = _classified(exc, job_id=job_id, doing=f"could not stop Ray job {job_id}")
            if isinstance(error, JobNotFoundError):
                log.info("Ray job %s is unknown to the cluster: nothing to stop", job_id)
                return
            raise error from exc


def _classified(exc: Exception, *, doing: str, job_id: str | None = None) -> DispatchError:
    """What an exception of ray.job_submission means: no such job (the server answered 404), no answer
    (connection refused or reset, timeout, a 5xx from the server or a proxy), or a refusal (anything else,
    e.g. a wrong token)."""
    if isinstance(exc, DispatchError):
        return exc
    text = str(exc)
    found = _STATUS_CODE.search(text)
    status = int(found.group(1)) if found else None
    if job_id is not None and (status == 404 or "does not exist" in text):
        return JobNotFoundError(job_id, text)
    # requests' ConnectionError and Timeout, and the builtin ConnectionError the client's constructor
    # raises, are all OSErrors.
    if isinstance(exc, OSError) or (status is not None and status >= 500):
        return ClusterUnreachableError(
            f"{doing}: the Ray job server did not answer ({type(exc).__name__}: {exc})"
        )
    return DispatchError(f"{doing}: {exc}")


_TRACEBACK = "Traceback (most recent call last):"


def condensed(message: str, max_chars: int = 2000) -> str:
    """An error message whose tracebacks (Ray's job server sends its own in a 500's body) are cut to their
    last line, the exception and its message: what a page can show of what Ray said."""
    head, marker, rest = message.partition(_TRACEBACK)
    text = head if not marker else f"{head.rstrip()} {ray_words(marker + rest, max_chars)}"
    text = " ".join(text.split())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def ray_words(text: str, max_chars: int = 300) -> str:
    """What Ray said, in one line: a traceback's last line (the exception and its message), else the first."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip() and line.strip() != "."]
    if not lines:
        return "(no message)"
    traceback = lines[0].startswith("Traceback")
    line = lines[-1] if traceback else lines[0]
    return line if len(line) <= max_chars else line[: max_chars - 1] + "…"


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


def _runtime_env(driver_env: Mapping[str, str], py_modules: list[str]) -> dict[str, Any]:
    env: dict[str, Any] = {"env_vars": dict(driver_env)}
    if py_modules:
        env["py_modules"] = py_modules  # the study's plugins: Ray ships them to every node its job reaches
    return env


@contextlib.contextmanager
def shipped_plugins(spec: Mapping | None) -> Iterator[list[str]]:
    """The study's stored plugins written as packages into a temporary directory, for `py_modules`
    (Ray uploads them when the job is submitted, so the directory goes once it is). An installed
    plugin (an entry point) is not shipped: it must be installed on every node."""
    entries = [e for e in (spec or {}).get("plugins") or () if e.get("files") and not e.get("distribution")]
    if not entries:
        yield []
        return
    with tempfile.TemporaryDirectory(prefix="normlab-ship-") as root:
        yield [str(write_package(PluginSource.from_entry(entry), Path(root))) for entry in entries]
