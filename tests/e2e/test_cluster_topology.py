"""The docker-compose topology without containers: PostgreSQL for NormLab and MLflow, a Ray head that runs
no trials, a separate Ray worker node, and the API pointed at all three (RAY_ADDRESS set, so `normlab serve`
starts nothing itself). A study must run its trials on the worker node and land in PostgreSQL."""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from mlflow.tracking import MlflowClient

from service.stack.local_stack import mlflow_server, ray_head, ray_worker
from service.stack.processes import free_port, http_ok, wait_until
from studies.store import list_trials, make_engine, session_scope
from tests.e2e.conftest import start_serve
from tests.e2e.specs import two_method_grid

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ADMIN_URL = os.environ.get("NORMLAB_TEST_POSTGRES_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"  # two loopback addresses: two Ray nodes on one machine


def _admin(sql: str) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        connection.execute(sql)


@pytest.fixture(scope="module")
def postgres_databases():
    suffix = uuid.uuid4().hex[:8]
    names = (f"nl_e2e_{suffix}", f"nl_e2e_{suffix}_mlflow")
    for name in names:
        _admin(f'CREATE DATABASE "{name}"')
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    yield {"normlab": f"{base}/{names[0]}", "mlflow": f"{base}/{names[1]}"}
    for name in names:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, postgres_databases):
    data = tmp_path_factory.mktemp("topology")
    token = uuid.uuid4().hex
    ray_temp = Path("/tmp") / f"nl-topo-{uuid.uuid4().hex[:6]}"
    mlflow_port, dashboard_port = free_port(), free_port()
    base_port = random.randint(20000, 31000)
    processes = []
    try:
        tracking = mlflow_server(
            data_dir=data, host="127.0.0.1", port=mlflow_port, backend_store_uri=postgres_databases["mlflow"]
        )
        tracking.start(timeout=180)
        processes.append(tracking)
        head = ray_head(
            data_dir=data,
            token=token,
            gcs_port=free_port(),
            node_ip=HEAD_IP,
            dashboard_host=HEAD_IP,
            dashboard_port=dashboard_port,
            dashboard_agent_listen_port=free_port(),
            client_server_port=free_port(),
            min_worker_port=base_port,
            max_worker_port=base_port + 200,
            num_cpus=0,  # like a real head: it runs study drivers, never trials
            temp_dir=ray_temp,
        )
        head.start(timeout=180)
        processes.append(head)
        gcs = next(arg.split("=", 1)[1] for arg in head.argv if arg.startswith("--port="))
        worker = ray_worker(
            data_dir=data,
            token=token,
            head_address=f"{HEAD_IP}:{gcs}",
            node_ip=WORKER_IP,
            min_worker_port=base_port + 300,
            max_worker_port=base_port + 500,
            num_cpus=2,
            temp_dir=ray_temp,
        )
        worker.start(timeout=180)
        processes.append(worker)
        yield {
            "data": data,
            "token": token,
            "mlflow": f"http://127.0.0.1:{mlflow_port}",
            "ray": f"http://{HEAD_IP}:{dashboard_port}",
            "database": postgres_databases["normlab"],
        }
    finally:
        for process in reversed(processes):
            process.stop()


@pytest.fixture(scope="module")
def api(cluster, tmp_path_factory):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NORMLAB_", "RAY_"))}
    env.update(
        {
            "NORMLAB_DATA_DIR": str(cluster["data"]),
            "DATABASE_URL": cluster["database"],
            "MLFLOW_TRACKING_URI": cluster["mlflow"],
            "RAY_ADDRESS": cluster["ray"],
            "NORMLAB_RAY_AUTH_TOKEN": cluster["token"],
            "NORMLAB_API_TOKEN": "topology-token",
            "NORMLAB_API_PORT": str(port),
            "NORMLAB_POLL_INTERVAL_S": "1",
        }
    )
    log_path = tmp_path_factory.mktemp("api") / "api.log"
    process = start_serve(env, log_path)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: process.poll() is not None or http_ok(f"{url}/healthz"), timeout=180)
        assert process.poll() is None, log_path.read_text()
        yield {"url": url, "log": log_path}
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    # The API started neither Ray nor MLflow: they belong to the cluster.
    assert "starting a local Ray head" not in log_path.read_text()
    assert "starting MLflow" not in log_path.read_text()


def test_a_study_runs_its_trials_on_the_worker_node_and_lands_in_postgres(cluster, api):
    spec = two_method_grid("topology", epochs=1)
    with httpx.Client(base_url=api["url"], timeout=30) as client:
        created = client.post("/studies", json=spec, headers={"Authorization": "Bearer topology-token"})
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            study = client.get(f"/studies/{study_id}").json()
            if study["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(2)
    assert study["status"] == "succeeded", f"{study.get('error')}\n{api['log'].read_text()[-3000:]}"
    with session_scope(make_engine(cluster["database"]), readonly=True) as session:
        trials = list_trials(session, study_id=study_id)
    assert len(trials) == 4 and all(t.status == "succeeded" for t in trials)
    # Tune's own per-epoch records (shared storage) say where each trial ran: the worker, never the head.
    results = list((cluster["data"] / "ray_results" / study_id).rglob("result.json"))
    assert len(results) == 4
    node_ips = {json.loads(line)["node_ip"] for path in results for line in path.read_text().splitlines()}
    assert node_ips == {WORKER_IP}
    runs = MlflowClient(cluster["mlflow"]).search_runs([study["mlflow_experiment_id"]], max_results=100)
    assert len([r for r in runs if r.data.tags.get("normlab.role") != "parent"]) == 4
