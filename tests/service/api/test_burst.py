"""No 5xx under a burst (issue 23): 200 requests in flight at once against a real server on a real database
(SQLite file, PostgreSQL) answer 2xx, 4xx or 503 with Retry-After, never a 500, and every study answered
201 is stored exactly once.

Before the fix, past AnyIO's 40 worker threads the API deadlocked until a timeout fired: 41 concurrent POSTs
on SQLite answered 14 500s after the 15 s busy timeout, 60 concurrent GET /studies 500s after the 30 s pool
timeout. The server is uvicorn running the app factory (the routes `normlab serve` serves) without Ray,
MLflow or the background loop, none of which a route waits for.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import yaml

from service.stack.processes import ManagedProcess, free_port
from studies.store import Study, create_study, record_trial, session_scope
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import API_TOKEN, AUTH

pytestmark = pytest.mark.slow

IN_FLIGHT = 200  # requests at once: 5x AnyIO's 40 worker threads, 13x the 15 pooled connections
# A request unanswered after this long counts as never answered (status 0): before the fix, some were.
ANSWER_TIMEOUT_S = 60
SHARED_KEY_POSTS = 10  # POSTs of one spec under one Idempotency-Key, among the burst's POSTs
SPEC = yaml.safe_load(QUICK_SPEC_YAML)


@dataclass(frozen=True)
class Answer:
    kind: str  # post, post-keyed, list, results, read
    name: str | None  # the submitted study's name (POSTs)
    status: int  # 0: never answered (the connection failed or timed out)
    retry_after: str | None
    study_id: str | None  # the id a 200/201 POST answered


@pytest.fixture
def finished_study(engine: sa.Engine) -> str:
    """A study with final-phase trials, so GET /results builds a real table with its evidence."""
    with session_scope(engine) as session:
        study_id = create_study(session, spec={**SPEC, "name": "finished"}).id
        for method, base in (("autonorm_s", 0.95), ("frozen_ln", 0.90), ("dyt", 0.905)):
            for seed in SPEC["seeds"]:
                value = base + seed / 100
                record_trial(
                    session,
                    study_id=study_id,
                    trial_key=f"{study_id}-final-{method}-{seed}",
                    phase="final",
                    method=method,
                    config={"method": method, "seed": seed},
                    seed=seed,
                    status="succeeded",
                    metrics={"test_accuracy": value, "val_accuracy": value - 0.1, "train_loss": 1 - value},
                    metric_value=value,
                    mlflow_run_id=None,
                )
    return study_id


@pytest.fixture
def api_url(database_url: str, finished_study: str, tmp_path: Path, monkeypatch) -> Iterator[str]:
    monkeypatch.chdir(tmp_path)  # no .env from the working tree
    port = free_port()
    server = ManagedProcess(
        name="api",
        argv=[sys.executable, "-m", "uvicorn", "--factory", "service.api.app:create_app", *_listen(port)],
        log_path=tmp_path / "api.log",
        env={
            "DATABASE_URL": database_url,
            "NORMLAB_DATA_DIR": str(tmp_path / "data"),
            "NORMLAB_API_TOKEN": API_TOKEN,
        },
        health_url=f"http://127.0.0.1:{port}/healthz",
    )
    server.start(timeout=60)
    try:
        yield f"http://127.0.0.1:{port}"
        assert "Traceback" not in server.log_tail(lines=10_000), server.log_tail()
    finally:
        server.stop()


def _listen(port: int) -> list[str]:
    return ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]


async def _request(client: httpx.AsyncClient, index: int, study_id: str, shared_key: str) -> Answer:
    kind = ("post", "list", "results", "read")[index % 4]
    try:
        return await _send(client, kind, index, study_id, shared_key)
    except httpx.TransportError:
        return Answer(kind=kind, name=None, status=0, retry_after=None, study_id=None)


async def _send(client: httpx.AsyncClient, kind: str, index: int, study_id: str, shared_key: str) -> Answer:
    name = None
    if kind == "post":
        keyed = index // 4 < SHARED_KEY_POSTS
        name = "burst-keyed" if keyed else f"burst-{index}"
        headers = {**AUTH, **({"Idempotency-Key": shared_key} if keyed else {})}
        response = await client.post("/studies", json={**SPEC, "name": name}, headers=headers)
        kind = "post-keyed" if keyed else kind
    elif kind == "list":
        response = await client.get("/studies")
    elif kind == "results":
        response = await client.get("/results/digits")
    else:
        response = await client.get(f"/studies/{study_id}")
    created = kind.startswith("post") and response.status_code in (200, 201)
    return Answer(
        kind=kind,
        name=name,
        status=response.status_code,
        retry_after=response.headers.get("Retry-After"),
        study_id=response.json()["id"] if created else None,
    )


async def _burst(api_url: str, study_id: str) -> list[Answer]:
    shared_key = uuid.uuid4().hex
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with httpx.AsyncClient(base_url=api_url, limits=limits, timeout=ANSWER_TIMEOUT_S) as client:
        return await asyncio.gather(*(_request(client, i, study_id, shared_key) for i in range(IN_FLIGHT)))


def _stored(engine: sa.Engine) -> list[tuple[str, str]]:
    """(name, id) of every study the burst stored."""
    with session_scope(engine, readonly=True) as session:
        rows = session.execute(sa.select(Study.name, Study.id).where(Study.name.like("burst-%")))
        return [(name, study_id) for name, study_id in rows]


def test_a_burst_of_mixed_requests_never_answers_5xx_and_stores_each_created_study_once(
    api_url, engine, finished_study, record_property
):
    started = time.monotonic()
    answers = asyncio.run(_burst(api_url, finished_study))
    record_property("burst_wall_s", round(time.monotonic() - started, 2))
    statuses = Counter((a.kind, a.status) for a in answers)
    record_property("statuses", dict(statuses))

    bad = [a for a in answers if not (200 <= a.status < 500 or (a.status == 503 and a.retry_after))]
    assert not bad, f"{len(bad)} answers neither 2xx/4xx nor 503 with Retry-After (0: none): {statuses}"
    assert {a.status for a in answers if a.kind in ("list", "read")} <= {200, 503}
    assert {a.status for a in answers if a.kind == "results"} <= {200, 503}

    stored = _stored(engine)
    twice = [name for name, count in Counter(name for name, _ in stored).items() if count > 1]
    assert twice == [], f"submissions stored more than once: {twice}"
    # Every 201 is stored, and nothing else is: a shed (503) submission stored nothing.
    created = {(a.name, a.study_id) for a in answers if a.kind == "post" and a.status == 201}
    assert created == {row for row in stored if row[0] != "burst-keyed"}
    # One Idempotency-Key: at most one 201, every other success a replay of that same study.
    keyed = [a for a in answers if a.kind == "post-keyed" and a.status in (200, 201)]
    keyed_stored = {study_id for name, study_id in stored if name == "burst-keyed"}
    assert [a.status for a in keyed].count(201) == len(keyed_stored) <= 1
    assert {a.study_id for a in keyed} == keyed_stored
