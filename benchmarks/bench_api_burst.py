"""The API under a burst: throughput and latency at 1, 50 and 200 concurrent clients (issue 23).

    python -m benchmarks.bench_api_burst [--quick]

uvicorn serves the app factory (the routes `normlab serve` serves, without Ray, MLflow or the background
loop, none of which a route waits for) on a real database: a SQLite file, and PostgreSQL when one answers
at NORMLAB_BENCH_POSTGRES_URL (default: the tests' server, postgresql+psycopg://postgres@127.0.0.1:5432/test),
in a throwaway schema. The database holds 100 queued studies (a full GET /studies page from the start) and
one finished study with nine final trials (GET /results builds its table and evidence).

Every client sends its requests back to back, cycling through the mix: POST /studies with the token, GET
/studies, GET /results/digits, GET /studies/{id}. Each level (1, 50, 200 clients at once) sends the same
number of requests; the levels run interleaved, round after round, so the machine's noise falls on each
alike. Throughput is the median over rounds of requests / wall; latencies pool every round's requests. The
load generator (one asyncio process, httpx) shares the machine's cores with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from service.stack.processes import ManagedProcess, free_port
from studies.store import create_study, make_engine, record_trial, session_scope, upgrade_database

LEVELS = (1, 50, 200)  # clients at once
MIX = ("post", "list", "results", "read")
TOKEN = "bench-" + uuid.uuid4().hex
POSTGRES_URL = os.environ.get(
    "NORMLAB_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
SEEDS = (0, 1, 2)
SPEC = {
    "name": "bench",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "methods": ["autonorm_s", "frozen_ln", "dyt"],
    "search": {"lr": {"type": "loguniform", "low": 1.0e-4, "high": 1.0e-2}},
    "method_search": {"autonorm_s": {"tau": 0.5, "t_freeze": {"type": "int", "low": 1, "high": 3}}},
    "num_samples": 2,
    "seeds": list(SEEDS),
    "budget": {"epochs": 4, "batch_size": 32},
}


@dataclass
class Level:
    """One level's requests over every round."""

    clients: int
    throughputs: list[float] = field(default_factory=list)  # requests per second, one per round
    latencies_ms: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)  # the status, or the client's error unanswered

    @property
    def requests_per_s(self) -> float:
        return statistics.median(self.throughputs)

    def percentile_ms(self, q: int) -> float:
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[q - 1]

    @property
    def shed(self) -> int:
        return self.outcomes["503"]

    @property
    def failures(self) -> Counter[str]:
        """Server errors but shed load (503), and requests never answered (by the client's error)."""
        return Counter(
            {o: n for o, n in self.outcomes.items() if not o.isdigit() or (o >= "500" and o != "503")}
        )


# --------------------------------------------------------------------------- databases and the server


def _postgres_answers(url: str) -> bool:
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            return True
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


@contextmanager
def _database(backend: str, workdir: Path) -> Iterator[str]:
    """An empty database: a SQLite file, or a fresh schema on the PostgreSQL server."""
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'normlab.db'}"
        return
    schema = f"nl_bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        # libpq `options` pins the search path, so every connection (Alembic's too) lives in the schema.
        url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def _seed(database_url: str) -> str:
    """100 queued studies and a finished one with final trials; returns the finished study's id."""
    upgrade_database(database_url)
    engine = make_engine(database_url)
    try:
        with session_scope(engine) as session:
            for index in range(100):
                create_study(session, spec={**SPEC, "name": f"queued-{index}"})
            study_id = create_study(session, spec={**SPEC, "name": "finished"}).id
            for method, base in (("autonorm_s", 0.95), ("frozen_ln", 0.90), ("dyt", 0.905)):
                for seed in SEEDS:
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
                        metrics={
                            "test_accuracy": value,
                            "val_accuracy": value - 0.1,
                            "train_loss": 1 - value,
                        },
                        metric_value=value,
                        mlflow_run_id=None,
                    )
        return study_id
    finally:
        engine.dispose()


def _listen(port: int) -> list[str]:
    return ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]


@contextmanager
def _server(database_url: str, workdir: Path) -> Iterator[str]:
    port = free_port()
    server = ManagedProcess(
        name="api",
        argv=[sys.executable, "-m", "uvicorn", "--factory", "service.api.app:create_app", *_listen(port)],
        log_path=workdir / "api.log",
        env={
            "DATABASE_URL": database_url,
            "NORMLAB_DATA_DIR": str(workdir / "data"),
            "NORMLAB_API_TOKEN": TOKEN,
        },
        health_url=f"http://127.0.0.1:{port}/healthz",
    )
    server.start(timeout=60)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        if "Traceback" in server.log_tail(lines=100_000):
            print(f"the API logged errors:\n{server.log_tail(lines=60)}", file=sys.stderr)


# --------------------------------------------------------------------------- the load


async def _one(http: httpx.AsyncClient, kind: str, study_id: str) -> int:
    if kind == "post":
        spec = {**SPEC, "name": f"burst-{uuid.uuid4().hex[:8]}"}
        response = await http.post("/studies", json=spec, headers={"Authorization": f"Bearer {TOKEN}"})
    elif kind == "list":
        response = await http.get("/studies")
    elif kind == "results":
        response = await http.get("/results/digits")
    else:
        response = await http.get(f"/studies/{study_id}")
    return response.status_code


async def _client(api_url: str, first: int, count: int, study_id: str, level: Level) -> None:
    """One client with its own keep-alive connection, as separate clients have. (One pool shared by all
    would hand a client a connection another left idle for seconds, which the server may close just as
    the request goes out: a reset no client of its own would see.)"""
    async with httpx.AsyncClient(base_url=api_url, timeout=60) as http:
        for index in range(first, first + count):
            await _timed(http, index, study_id, level)


async def _timed(http: httpx.AsyncClient, index: int, study_id: str, level: Level) -> None:
    started = time.perf_counter()
    try:
        outcome = str(await _one(http, MIX[index % len(MIX)], study_id))
    except httpx.TransportError as error:
        outcome = type(error).__name__  # never answered
    level.latencies_ms.append((time.perf_counter() - started) * 1000)
    level.outcomes[outcome] += 1


async def _round(api_url: str, level: Level, requests: int, study_id: str) -> None:
    per_client = requests // level.clients
    started = time.perf_counter()
    await asyncio.gather(
        *(_client(api_url, c * per_client, per_client, study_id, level) for c in range(level.clients))
    )
    level.throughputs.append(per_client * level.clients / (time.perf_counter() - started))


def measure(backend: str, *, rounds: int, requests: int) -> list[Level]:
    levels = [Level(clients) for clients in LEVELS]
    with tempfile.TemporaryDirectory(prefix="normlab-burst-") as tmp, _database(backend, Path(tmp)) as url:
        study_id = _seed(url)
        with _server(url, Path(tmp)) as api_url:
            asyncio.run(_round(api_url, Level(10), 40, study_id))  # warm-up: imports, pools, caches
            for _ in range(rounds):
                for level in levels:
                    asyncio.run(_round(api_url, level, requests, study_id))
    return levels


# --------------------------------------------------------------------------- the section


def section(results: dict[str, list[Level]], *, rounds: int, requests: int, skipped: str = "") -> str:
    rows = []
    for backend, levels in results.items():
        one = levels[0]
        for level in levels:
            rows.append(
                f"| {backend} | {level.clients} | {level.requests_per_s:.0f} | "
                f"{level.requests_per_s / one.requests_per_s:.2f}x | {level.percentile_ms(50):.0f} | "
                f"{level.percentile_ms(50) / one.percentile_ms(50):.1f}x | {level.percentile_ms(99):.0f} | "
                f"{level.percentile_ms(99) / one.percentile_ms(99):.1f}x | {level.shed} | {sum(level.failures.values())} |"
            )
    return (
        "## The API under a burst (benchmarks/bench_api_burst.py)\n\n"
        f"uvicorn serving the app factory on a real database; {requests} requests per level and round, "
        f"{rounds} rounds, the levels interleaved; the mix cycles POST /studies, GET /studies (100 studies), "
        "GET /results/digits (a finished study's table and evidence), GET /studies/{id}. "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared by the server and the load generator; "
        "ratios are to one client on the same backend.\n\n"
        "| backend | clients | req/s | throughput vs 1 client | p50 ms | p50 vs 1 | p99 ms | p99 vs 1 "
        "| 503 (shed) | 5xx or unanswered |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n" + skipped + "\n"
        "Target: no 5xx and no unanswered request at any level; a request the API cannot serve within "
        "`NORMLAB_DB_QUEUE_TIMEOUT_S` (10 s) is a 503 with Retry-After. Reproduce: "
        "`python -m benchmarks.bench_api_burst`\n"
    )


def run(quick: bool = False) -> str:
    rounds, requests = (1, 200) if quick else (3, 400)
    backends = ["sqlite"]
    skipped = ""
    if _postgres_answers(POSTGRES_URL):
        backends.append("postgresql")
    else:
        skipped = f"\nPostgreSQL not measured: nothing answered at {make_url(POSTGRES_URL).host}.\n"
    results = {backend: measure(backend, rounds=rounds, requests=requests) for backend in backends}
    return section(results, rounds=rounds, requests=requests, skipped=skipped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one round of 200 requests per level")
    print(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
