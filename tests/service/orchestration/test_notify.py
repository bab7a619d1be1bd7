"""A study's end is announced to NORMLAB_NOTIFY_URL once: a JSON POST with a one-line text and links,
sent by the reconcile loop to a real HTTP server here; a failed POST is tried again on the next tick, and
a study that ended before the window is not announced late."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from service.orchestration.notify import StudyNotifier
from studies.store import session_scope, set_study_status
from tests.factories import add_study


class _Receiver:
    """A local webhook: records each POSTed JSON body; answers `status`."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver():
    hook = _Receiver()
    yield hook
    hook.server.shutdown()


def _ended(engine, status: str, error: str | None = None) -> str:
    study_id = add_study(engine, status="running").id
    with session_scope(engine) as session:
        set_study_status(session, study_id=study_id, status=status, error=error)
    return study_id


def test_an_ended_study_is_announced_once_with_its_status_error_and_links(engine, receiver):
    study_id = _ended(engine, "failed", error="no finite objective: every trial failed\ntraceback...")
    notifier = StudyNotifier(engine, url=receiver.url, api_url="http://normlab.example:8000/")
    notifier.tick()
    notifier.tick()  # announced already: nothing more
    (body,) = receiver.bodies
    assert body["study_id"] == study_id and body["status"] == "failed"
    assert body["text"].endswith(f"http://normlab.example:8000/studies/{study_id}")
    assert "failed" in body["text"] and "no finite objective: every trial failed" in body["text"]
    assert "traceback" not in body["text"]  # the error's first line only; the whole one is in `error`
    assert body["links"]["report"] == f"http://normlab.example:8000/studies/{study_id}/report?format=html"


def test_a_refused_post_is_tried_again_on_the_next_tick(engine, receiver):
    _ended(engine, "succeeded")
    receiver.status = 503
    notifier = StudyNotifier(engine, url=receiver.url, api_url="http://localhost:8000")
    notifier.tick()
    receiver.status = 200
    notifier.tick()
    notifier.tick()
    assert len(receiver.bodies) == 2  # the refused one, then the one that got through; no third


def test_a_study_that_ended_before_the_window_is_not_announced_late(engine, receiver):
    _ended(engine, "cancelled")
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    StudyNotifier(engine, url=receiver.url, api_url="http://localhost:8000", clock=lambda: later).tick()
    assert receiver.bodies == []


def test_a_running_study_is_not_announced(engine, receiver):
    add_study(engine, status="running")
    StudyNotifier(engine, url=receiver.url, api_url="http://localhost:8000").tick()
    assert receiver.bodies == []


def test_the_reconcile_loop_announces_ended_studies_where_a_url_is_set(engine, receiver, tmp_path):
    from service.orchestration.reconcile import StudyReconciler
    from service.settings import Settings
    from tests.service.conftest import FakeDispatcher

    study_id = _ended(engine, "succeeded")
    settings = Settings(
        _env_file=None, data_dir=tmp_path, mlflow_tracking_uri="http://127.0.0.1:9", notify_url=receiver.url
    )
    quiet = StudyReconciler(
        engine, FakeDispatcher(), settings=settings.model_copy(update={"notify_url": None})
    )
    quiet.tick()
    assert receiver.bodies == []  # no URL: no announcement
    StudyReconciler(engine, FakeDispatcher(), settings=settings).tick()
    assert [body["study_id"] for body in receiver.bodies] == [study_id]
