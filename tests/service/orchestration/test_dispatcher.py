"""The dispatcher names each driver attempt's Ray job after its study and attempt, says in one line how a
driver that recorded no outcome ended, and tells a job the cluster does not have (cancel: done; state:
missing) from a cluster that does not answer (ClusterUnreachableError). Ray's job server is faked or stubbed
over HTTP here; tests/e2e use a real one."""

from __future__ import annotations

import inspect
import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
import ray
import requests

from service.orchestration.dispatcher import (
    ClusterUnreachableError,
    DispatchError,
    JobNotFoundError,
    JobState,
    RayJobDispatcher,
    submission_id_for,
)
from service.orchestration.ports import Dispatcher


@dataclass
class FakeJobClient:
    """What RayJobDispatcher uses of ray.job_submission.JobSubmissionClient."""

    jobs: dict[str, SimpleNamespace] = field(default_factory=dict)
    submitted: list[dict] = field(default_factory=list)

    def get_job_info(self, job_id: str) -> SimpleNamespace:
        if job_id not in self.jobs:
            raise RuntimeError(f"Job {job_id} does not exist")
        return self.jobs[job_id]

    def submit_job(self, **request) -> str:
        self.submitted.append(request)
        self.jobs[request["submission_id"]] = SimpleNamespace(message="", driver_exit_code=None)
        return request["submission_id"]


class _Dispatcher(RayJobDispatcher):
    def __init__(self, client: FakeJobClient) -> None:
        super().__init__(dashboard_url="http://ray.invalid:8265")
        self.fake = client

    def _client(self) -> FakeJobClient:
        return self.fake


def test_the_first_attempt_keeps_the_study_derived_id_and_later_ones_get_their_own():
    assert submission_id_for("abc") == submission_id_for("abc", 1) == "normlab-study-abc"
    assert submission_id_for("abc", 2) == "normlab-study-abc-attempt-2"
    assert len({submission_id_for("abc", n) for n in (1, 2, 3)}) == 3
    with pytest.raises(ValueError, match="from 1"):
        submission_id_for("abc", 0)


def test_each_attempt_is_submitted_once_as_its_own_job():
    client = FakeJobClient()
    dispatcher = _Dispatcher(client)
    first = dispatcher.submit("abc", {}, attempt=1)
    second = dispatcher.submit("abc", {}, attempt=2)
    again = dispatcher.submit("abc", {}, attempt=2)  # a retried tick
    assert (first, second, again) == ("normlab-study-abc", "normlab-study-abc-attempt-2", second)
    assert [r["submission_id"] for r in client.submitted] == [first, second]
    assert client.submitted[1]["metadata"] == {"normlab_study_id": "abc", "normlab_attempt": "2"}
    assert client.submitted[1]["entrypoint"].endswith("-m workers.driver --study-id abc")


@pytest.mark.parametrize("exit_code", [-9, 137])  # python's own code, and the shell's 128 + 9
def test_a_killed_driver_is_described_by_rays_first_line_and_its_signal(exit_code):
    client = FakeJobClient()
    client.jobs["j"] = SimpleNamespace(
        message=f"Job entrypoint command failed with exit code {exit_code}, last available logs (truncated "
        "to 20,000 chars):\nepoch 3 ...\n",
        driver_exit_code=exit_code,
    )
    reason = _Dispatcher(client).end_reason("j", JobState.FAILED)
    assert reason == (
        f"Ray job j ended failed: Job entrypoint command failed with exit code {exit_code} "
        "(killed by SIGKILL)"
    )


def test_an_ordinary_exit_code_names_no_signal():
    client = FakeJobClient()
    client.jobs["j"] = SimpleNamespace(
        message="Job entrypoint command failed with exit code 1", driver_exit_code=1
    )
    assert _Dispatcher(client).end_reason("j", JobState.FAILED).endswith("exit code 1")


def test_a_job_the_cluster_forgot_and_one_without_details_still_get_a_reason():
    dispatcher = _Dispatcher(FakeJobClient())
    assert "unknown to the cluster" in dispatcher.end_reason("gone", JobState.MISSING)
    assert dispatcher.end_reason("gone", JobState.STOPPED).startswith("Ray job gone ended stopped (details")


# ----- a missing job vs an unreachable cluster ---------------------------------------------------------


class _StubJobServer(BaseHTTPRequestHandler):
    """Ray's job server as far as these tests need it: its version, and a 404 for every job (it has none)."""

    def do_GET(self) -> None:
        if self.path == "/api/version":
            self._answer(200, json.dumps({"version": "4", "ray_version": ray.__version__}))
        else:
            self._no_such_job()

    def do_POST(self) -> None:
        self._no_such_job()

    def _no_such_job(self) -> None:
        job_id = self.path.removeprefix("/api/jobs/").split("/")[0]
        self._answer(404, f"Job {job_id} does not exist")

    def _answer(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # keep test output quiet
        pass


@pytest.fixture
def job_server_without_jobs() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StubJobServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def nothing_listening() -> str:
    """A loopback port that was free a moment ago: connections to it are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_cancelling_a_job_the_cluster_does_not_have_is_done_and_its_state_is_missing(job_server_without_jobs):
    dispatcher = RayJobDispatcher(dashboard_url=job_server_without_jobs)
    dispatcher.cancel("normlab-study-gone")  # nothing runs: nothing to stop, no error
    assert dispatcher.state("normlab-study-gone") is JobState.MISSING


def test_when_nothing_answers_cancel_state_and_submit_raise_cluster_unreachable(nothing_listening):
    dispatcher = RayJobDispatcher(dashboard_url=nothing_listening)
    for call in (
        lambda: dispatcher.cancel("j"),
        lambda: dispatcher.state("j"),
        lambda: dispatcher.submit("s"),
    ):
        with pytest.raises(ClusterUnreachableError, match=re.escape(nothing_listening)):
            call()


@dataclass
class _FlakyJobClient:
    """A job client whose requests fail after it connected: the dashboard went away, or answered 5xx."""

    error: Exception

    def stop_job(self, job_id: str) -> bool:
        raise self.error

    def get_job_status(self, job_id: str) -> str:
        raise self.error

    def get_job_info(self, job_id: str) -> SimpleNamespace:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        requests.exceptions.ConnectionError("connection reset by peer"),
        requests.exceptions.ReadTimeout("read timed out"),
        RuntimeError("Request failed with status code 503: Service Unavailable."),
    ],
)
def test_an_outage_during_a_request_is_never_taken_for_a_stopped_job(error):
    dispatcher = _Dispatcher(_FlakyJobClient(error))  # type: ignore[arg-type]
    with pytest.raises(ClusterUnreachableError):
        dispatcher.cancel("j")
    with pytest.raises(ClusterUnreachableError):
        dispatcher.state("j")


def test_a_refusal_is_a_dispatch_error_but_neither_missing_nor_unreachable():
    dispatcher = _Dispatcher(_FlakyJobClient(RuntimeError("Request failed with status code 401: bad token.")))  # type: ignore[arg-type]
    with pytest.raises(DispatchError) as raised:
        dispatcher.cancel("j")
    assert not isinstance(raised.value, (ClusterUnreachableError, JobNotFoundError))


def test_the_ray_dispatcher_offers_every_method_of_the_dispatcher_protocol_with_its_parameters():
    dispatcher = RayJobDispatcher(dashboard_url="http://ray.invalid:8265")
    assert isinstance(dispatcher, Dispatcher)
    for name in ("submit", "state", "end_reason", "logs_tail", "cancel"):
        protocol = inspect.signature(getattr(Dispatcher, name)).parameters
        implementation = inspect.signature(getattr(RayJobDispatcher, name)).parameters
        assert [(p.name, p.kind, p.default) for p in protocol.values()] == [
            (p.name, p.kind, p.default) for p in implementation.values()
        ], name
