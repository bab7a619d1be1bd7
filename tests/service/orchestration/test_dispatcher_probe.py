"""RayJobDispatcher.probe, readiness's question to Ray: would the job server take a job now? Asked with a
submission the head's job agent checks and refuses, so it walks the path a study takes and starts nothing.
Ray's job server is stubbed over HTTP with the answers Ray 2.60 gives (tests/e2e ask a real one)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from service.orchestration.dispatcher import (
    PROBE_SUBMISSION_ID,
    ClusterUnreachableError,
    DispatchError,
    RayJobDispatcher,
    condensed,
    ray_words,
)
from service.orchestration.ports import JobServerProbe

# The job agent refusing the probe's label selector, as the head passes it on (HTTP 500 around the agent's
# 400: the head wraps any error of its agent).
AGENT_REFUSED = """Traceback (most recent call last):
  File "ray/dashboard/modules/job/job_head.py", line 419, in submit_job
    resp = await job_agent_client.submit_job_internal(submit_request)
RuntimeError: Request failed with status code 400: Traceback (most recent call last):
  File "ray/dashboard/modules/job/job_manager.py", line 537, in submit_job
    raise ValueError(error_message)
ValueError: Invalid label selector value `!!`. The label selector value should contain optional operators.
.
"""
NO_AGENT = "No available agent to submit job, please try again later."


class _JobServer(BaseHTTPRequestHandler):
    # Per server (the fixture makes a subclass): what POST /api/jobs/ answers, and what it was sent.
    answer: ClassVar[tuple[int, str]] = (500, AGENT_REFUSED)
    requests: ClassVar[list[tuple[str, dict, str | None]]] = []
    url: ClassVar[str] = ""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        type(self).requests.append((self.path, body, self.headers.get("Authorization")))
        status, text = type(self).answer if self.path == "/api/jobs/" else (200, '{"stopped": true}')
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def job_server() -> Iterator[type[_JobServer]]:
    handler = type("JobServer", (_JobServer,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield handler
    server.shutdown()
    server.server_close()


def _dispatcher(job_server) -> RayJobDispatcher:
    return RayJobDispatcher(dashboard_url=job_server.url, auth_token="tok")


def test_the_ray_dispatcher_is_a_job_server_probe():
    assert isinstance(RayJobDispatcher(dashboard_url="http://ray.invalid"), JobServerProbe)


def test_a_job_agent_that_refuses_the_probe_means_the_job_server_takes_jobs(job_server):
    assert "takes jobs (its job agent answered)" in _dispatcher(job_server).probe()
    [(path, body, authorization)] = job_server.requests
    assert path == "/api/jobs/" and authorization == "Bearer tok"
    assert body["submission_id"] == PROBE_SUBMISSION_ID and body["entrypoint"] == "true"
    assert body["entrypoint_label_selector"]  # what the agent refuses before it records a job


def test_a_head_without_its_job_agent_takes_no_job_and_says_so_in_rays_words(job_server):
    job_server.answer = (500, NO_AGENT)
    with pytest.raises(ClusterUnreachableError) as raised:
        _dispatcher(job_server).probe()
    assert str(raised.value) == f"the Ray job server at {job_server.url} takes no job (HTTP 500: {NO_AGENT})"


def test_a_job_server_that_refuses_the_token_is_a_refusal_not_an_outage(job_server):
    job_server.answer = (401, "Unauthorized: missing or invalid token")
    with pytest.raises(DispatchError, match="refuses this stack's Ray token") as raised:
        _dispatcher(job_server).probe()
    assert not isinstance(raised.value, ClusterUnreachableError)


def test_nothing_listening_is_an_outage():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{holder.getsockname()[1]}"
    with pytest.raises(ClusterUnreachableError, match="did not answer"):
        RayJobDispatcher(dashboard_url=url).probe(timeout_s=2)


def test_a_ray_that_took_the_probe_has_it_stopped_at_once(job_server):
    job_server.answer = (200, json.dumps({"submission_id": PROBE_SUBMISSION_ID}))
    assert "takes jobs" in _dispatcher(job_server).probe()
    assert [path for path, _, _ in job_server.requests] == [
        "/api/jobs/",
        f"/api/jobs/{PROBE_SUBMISSION_ID}/stop",
    ]


def test_a_probe_ray_already_holds_is_refused_by_the_agent_too(job_server):
    job_server.answer = (500, f"ValueError: Job with submission_id {PROBE_SUBMISSION_ID} already exists.")
    assert "takes jobs" in _dispatcher(job_server).probe()


def test_rays_words_are_a_tracebacks_last_line_or_a_messages_first():
    assert ray_words(AGENT_REFUSED).startswith("ValueError: Invalid label selector value")
    assert ray_words(f"{NO_AGENT}\nmore") == NO_AGENT
    assert ray_words("") == "(no message)"
    assert condensed(f"Ray refused the job: {AGENT_REFUSED}") == (
        "Ray refused the job: ValueError: Invalid label selector value `!!`. The label selector value should "
        "contain optional operators."
    )
