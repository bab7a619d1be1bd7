"""A real `normlab serve` whose Ray job server does not answer (RAY_ADDRESS at a closed port): the banner and
/readyz say Ray is not ready and why, a posted study shows each failed submission in the API and on the
pages, and after NORMLAB_MAX_SUBMIT_FAILURES it fails with Ray's last words instead of waiting in silence."""

from __future__ import annotations

import os
import signal
import socket
import uuid
from html import unescape
from pathlib import Path

import httpx
import pytest

from service.stack.processes import http_ok, wait_until
from tests.e2e.conftest import API_TOKEN, REPO, serve_environment, start_serve

pytestmark = pytest.mark.slow


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_study_ray_does_not_take_shows_each_failure_and_then_fails_with_rays_words(tmp_path):
    ray = f"http://127.0.0.1:{_closed_port()}"
    env = serve_environment(tmp_path / "data", Path("/tmp") / f"nl-sub-{uuid.uuid4().hex[:6]}")
    env.update(
        {
            "RAY_ADDRESS": ray,  # a cluster elsewhere, as compose sets it: serve starts no head
            "NORMLAB_MAX_SUBMIT_FAILURES": "3",
            "NORMLAB_SUBMIT_BACKOFF_S": "1",
        }
    )
    api = f"http://127.0.0.1:{env['NORMLAB_API_PORT']}"
    log_path = tmp_path / "serve.log"
    process = start_serve(env, log_path)
    try:
        assert wait_until(lambda: process.poll() is not None or http_ok(f"{api}/healthz"), timeout=300)
        assert process.poll() is None, log_path.read_text()
        banner = log_path.read_text()
        assert "NOT READY" in banner and f"- ray: the Ray job server at {ray} did not answer" in banner, (
            banner
        )

        ready = httpx.get(f"{api}/readyz", timeout=30)
        assert ready.status_code == 503
        assert [line.split(":")[0] for line in ready.json()["not_ready"]] == ["ray"]

        spec = (REPO / "studies" / "examples" / "quick.yaml").read_text()
        posted = httpx.post(
            f"{api}/studies",
            content=spec,
            headers={"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/yaml"},
            timeout=30,
        )
        assert posted.status_code == 201, posted.text
        study_id = posted.json()["id"]

        def study() -> dict:
            return httpx.get(f"{api}/studies/{study_id}", timeout=30).json()

        assert wait_until(lambda: study()["submit_failures"], timeout=60)
        first = study()["submit_failures"][0]
        assert first["attempt"] == 1 and ray in first["error"] and "did not answer" in first["error"]
        if study()["status"] == "queued":  # the home page says why it waits (unless it failed meanwhile)
            home = unescape(httpx.get(f"{api}/", headers={"Accept": "text/html"}, timeout=30).text)
            assert "Ray did not take its driver (" in home and ray in home

        assert wait_until(lambda: study()["status"] == "failed", timeout=120), study()
        failed = study()
        assert len(failed["submit_failures"]) == 3 and failed["attempts"] == []
        assert failed["error"].startswith(
            "Ray did not take the study's driver (attempt 1): 3 submissions failed (NORMLAB_MAX_SUBMIT_FAILURES=3)"
        )
        assert ray in failed["error"]
        page = unescape(
            httpx.get(f"{api}/studies/{study_id}", headers={"Accept": "text/html"}, timeout=30).text
        )
        assert page.count('class="submit-failure-row"') == 3 and "not tried again" in page
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=120)
