"""The compose reader on the real docker-compose.yml and its CPU override: what `docker compose up` would
start, with no engine involved."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docker.compose_plan import ComposeError, interpolate, load_plan

REPO = Path(__file__).resolve().parents[2]
MAIN = REPO / "docker-compose.yml"
CPU = REPO / "docker-compose.cpu.yml"
ENV = {
    "POSTGRES_PASSWORD": "pg-secret",
    "NORMLAB_RAY_AUTH_TOKEN": "ray-secret",
    "NORMLAB_API_TOKEN": "api-secret",
    "MLFLOW_TRACKING_USERNAME": "tracker",
    "MLFLOW_TRACKING_PASSWORD": "mlflow-secret-pw",
}


def cpu_plan(**extra: str):
    return load_plan([MAIN, CPU], {**ENV, **extra}, project="t1", image_prefix="test/")


def test_interpolation_follows_compose():
    variables = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET} $SET $$SET", variables) == "x x $SET"
    assert interpolate("${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", variables) == "d d  d"
    assert interpolate("${SET:+alt}${EMPTY:+alt}${EMPTY+alt}", variables) == "altalt"
    assert interpolate("${UNSET}", variables) == ""
    with pytest.raises(ComposeError, match="set it"):
        interpolate("${EMPTY:?set it}", variables)
    assert interpolate("${EMPTY?set it}", variables) == ""


def test_a_missing_secret_stops_the_plan_with_the_files_message():
    with pytest.raises(ComposeError, match=re.escape("set POSTGRES_PASSWORD in .env")):
        load_plan([MAIN], {}, project="t")


def test_services_start_in_dependency_order_with_two_cpu_workers():
    plan = cpu_plan()
    assert [c.name for c in plan.containers] == [
        "t1-postgres-1",
        "t1-mlflow-1",
        "t1-ray-head-1",
        "t1-ray-worker-1",
        "t1-ray-worker-2",
        "t1-api-1",
    ]
    assert plan.network == "t1_default"
    assert plan.service("ray-worker")[0].depends_on == {"ray-head": "service_healthy"}
    assert plan.service("api")[0].depends_on == {
        "ray-head": "service_healthy",
        "postgres": "service_healthy",
        "mlflow": "service_healthy",
    }


def test_the_gpu_reservation_is_in_the_main_file_and_the_cpu_override_removes_it():
    main_only = load_plan([MAIN], ENV, project="t")
    assert [c.gpus for c in main_only.service("ray-worker")] == [True]  # NORMLAB_GPU_WORKERS defaults to 1
    assert not any(c.gpus for c in cpu_plan().containers)


def test_the_cpu_override_builds_the_cpu_torch_wheel_once_for_three_services():
    plan = cpu_plan()
    builds = {b.image: b for b in plan.builds}
    assert set(builds) == {"test/normlab:latest", "test/normlab-mlflow"}
    normlab = builds["test/normlab:latest"]
    assert normlab.dockerfile == REPO / "docker" / "Dockerfile" and normlab.context == REPO
    assert normlab.args["TORCH_SPEC"] == "torch==2.13.0+cpu"
    assert normlab.args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    assert normlab.args["PIP_INSTALL_ARGS"] == ""
    assert {c.image for c in plan.containers if c.service in ("ray-head", "ray-worker", "api")} == {
        "test/normlab:latest"
    }
    main_only = load_plan([MAIN], ENV, project="t")
    assert {b.args["TORCH_SPEC"] for b in main_only.builds if "TORCH_SPEC" in b.args} == {"torch==2.13.0"}


def test_env_file_and_environment_reach_the_containers_with_secrets_interpolated():
    plan = cpu_plan(NORMLAB_CPU_WORKER_CPUS="1")
    api = plan.service("api")[0]
    assert api.environment["NORMLAB_API_TOKEN"] == "api-secret"  # from env_file: .env
    assert api.environment["RAY_ADDRESS"] == "http://ray-head:8265"
    assert api.environment["DATABASE_URL"] == "postgresql+psycopg://normlab:pg-secret@postgres:5432/normlab"
    worker = plan.service("ray-worker")[0]
    assert worker.environment["RAY_WORKER_CPUS"] == "1"
    assert "RAY_ADDRESS" not in worker.environment
    assert worker.command == ["ray-worker"]
    mlflow = plan.service("mlflow")[0]
    assert "--backend-store-uri=postgresql://normlab:pg-secret@postgres:5432/mlflow" in mlflow.command
    assert mlflow.environment["MLFLOW_WORKERS"] == "1"  # from the CPU override


def test_volumes_ports_and_healthchecks():
    plan = cpu_plan()
    assert sorted(plan.volumes) == [
        "t1_mlflow-artifacts",
        "t1_mlflow-auth",
        "t1_normlab-data",
        "t1_postgres-data",
    ]
    data_mounts = {
        (m.source, m.target)
        for c in plan.containers
        if c.service.startswith(("ray-", "api"))
        for m in c.mounts
    }
    assert data_mounts == {("t1_normlab-data", "/data")}  # one volume shared by every node and the API
    init = next(m for m in plan.service("postgres")[0].mounts if not m.named)
    assert init.source == str(REPO / "docker" / "postgres-init.sql") and init.read_only
    assert [(p.host_ip, p.container_port) for p in plan.service("api")[0].ports] == [("127.0.0.1", 8000)]
    head_check = plan.service("ray-head")[0].healthcheck
    assert (
        head_check is not None and "${NORMLAB_RAY_AUTH_TOKEN}" in head_check.shell_command
    )  # $$ kept for the shell
    mlflow_check = plan.service("mlflow")[0].healthcheck
    assert mlflow_check is not None and mlflow_check.shell_command.startswith("python -c ")
    assert plan.service("ray-worker")[0].shm_size == "8gb"
    assert {c.restart for c in plan.containers} == {"unless-stopped"}


def test_mlflow_runs_without_its_job_execution():
    # Its job runner and huey consumers (~1.4 GB idle) run GenAI jobs only; NormLab submits none.
    mlflow = cpu_plan().service("mlflow")[0]
    assert mlflow.environment["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"


def test_mlflow_runs_its_basic_auth_app_with_the_env_files_admin_and_every_node_signs_in_as_it():
    plan = cpu_plan()
    mlflow = plan.service("mlflow")[0]
    assert mlflow.environment["MLFLOW_AUTH_ADMIN_USERNAME"] == "tracker"
    assert mlflow.environment["MLFLOW_AUTH_ADMIN_PASSWORD"] == "mlflow-secret-pw"
    assert mlflow.environment["MLFLOW_AUTH_DEFAULT_PERMISSION"] == "NO_PERMISSIONS"
    # The auth database sits on a volume of its own, not under the artifact root MLflow serves.
    auth_db = mlflow.environment["MLFLOW_AUTH_DATABASE_URI"]
    assert auth_db == "sqlite:////mlflow-auth/basic_auth.db"
    assert {(m.source, m.target) for m in mlflow.mounts} == {
        ("t1_mlflow-artifacts", "/mlartifacts"),
        ("t1_mlflow-auth", "/mlflow-auth"),
    }
    mlflow_build = next(b for b in plan.builds if b.image == "test/normlab-mlflow")
    dockerfile = mlflow_build.dockerfile.read_text()
    assert '"mlflow[auth]>=3,<4"' in dockerfile and "docker/mlflow_entrypoint.py" in dockerfile
    for service in ("api", "ray-head", "ray-worker"):
        for container in plan.service(service):
            assert container.environment["MLFLOW_TRACKING_USERNAME"] == "tracker", container.name
            assert container.environment["MLFLOW_TRACKING_PASSWORD"] == "mlflow-secret-pw", container.name


def test_a_missing_mlflow_password_stops_the_plan_with_the_files_message():
    variables = {k: v for k, v in ENV.items() if k != "MLFLOW_TRACKING_PASSWORD"}
    with pytest.raises(ComposeError, match=re.escape("set MLFLOW_TRACKING_PASSWORD in .env")):
        load_plan([MAIN, CPU], variables, project="t")
