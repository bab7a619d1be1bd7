"""The embedded stack as `normlab serve` starts it (service.stack.launcher.local_stack): a Ray head whose every
server listens on loopback only, that runs jobs, and that a second `normlab serve` (or `--api-only`)
attaches to instead of starting another; an MLflow that answers only the stack's user, whom every job on
the head signs in as."""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from pydantic import SecretStr
from rich.console import Console

from service.settings import Settings
from service.stack.launcher import LocalStack, Origin, local_stack, startup_banner
from service.stack.probe import StackUnavailableError
from service.stack.processes import free_port, free_port_range, http_ok, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack_settings(tmp_path_factory) -> Iterator[Settings]:
    ray_temp = Path("/tmp") / f"nl-stack-{uuid.uuid4().hex[:6]}"  # unix socket paths stay short
    worker_base = free_port_range(201)  # below the ephemeral range free_port() draws from
    yield Settings(
        _env_file=None,
        data_dir=tmp_path_factory.mktemp("stack"),
        database_url=None,
        mlflow_tracking_uri=None,
        ray_address=None,
        api_token="stack-test-token",
        ray_auth_token=None,
        mlflow_username="normlab",
        mlflow_password=None,  # generated into the data dir, whatever this shell exports
        mlflow_port=free_port(),
        ray_gcs_port=free_port(),
        ray_dashboard_port=free_port(),
        ray_dashboard_agent_listen_port=free_port(),
        ray_dashboard_agent_grpc_port=free_port(),
        ray_node_manager_port=free_port(),
        ray_object_manager_port=free_port(),
        ray_metrics_export_port=free_port(),
        ray_runtime_env_agent_port=free_port(),
        ray_dashboard_metrics_port=free_port(),
        ray_client_server_port=free_port(),
        ray_min_worker_port=worker_base,
        ray_max_worker_port=worker_base + 200,
        ray_num_cpus=1,
        ray_temp_dir=ray_temp,
    )
    shutil.rmtree(ray_temp, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(stack_settings: Settings) -> Iterator[LocalStack]:
    """What `normlab serve` starts on a machine where nothing runs yet: MLflow and a Ray head."""
    with local_stack(stack_settings) as started:
        yield started


def _is_loopback(host: str) -> bool:
    address = ipaddress.ip_address(host)
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, as a dual-stack socket shows it
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _head_processes(stack: LocalStack) -> list[psutil.Process]:
    head = next(p for p in stack.processes if p.name == "ray-head")
    assert head._popen is not None
    root = psutil.Process(head._popen.pid)
    return [root, *root.children(recursive=True)]


def _listening(processes: list[psutil.Process]) -> list[tuple[str, int, str]]:
    """(address, port, process) of every listening TCP socket the processes hold."""
    names = {}
    for process in processes:
        try:
            names[process.pid] = process.name()
        except psutil.NoSuchProcess:
            continue
    return [
        (conn.laddr.ip, conn.laddr.port, names[conn.pid])
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.pid in names
    ]


def test_the_first_serve_starts_mlflow_the_ray_head_and_a_warm_driver_server(stack):
    assert [p.name for p in stack.processes] == ["mlflow", "ray-head", "warm-drivers"]
    assert (stack.mlflow, stack.ray) == (Origin.STARTED, Origin.STARTED)


def test_the_jobs_of_the_head_it_started_are_told_where_the_warm_driver_server_listens(stack):
    socket_path = Path(stack.dispatcher.driver_env["NORMLAB_WARM_DRIVER_SOCKET"])
    assert socket_path.is_socket()
    assert socket_path.stat().st_mode & 0o777 == 0o600  # a client chooses a driver's environment


def test_mlflow_runs_without_its_job_runner_and_huey_consumers(stack):
    # `mlflow server` starts its job runner before its server answers (and the runner its huey consumers
    # soon after): by now, with job execution on, the runner would be among its children.
    mlflow = next(p for p in stack.processes if p.name == "mlflow")
    assert mlflow._popen is not None
    root = psutil.Process(mlflow._popen.pid)
    commands = []
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            commands.append(" ".join(process.cmdline()))
    assert any("mlflow" in command and "server" in command for command in commands), commands
    job_execution = [c for c in commands if "huey" in c or "mlflow.server.jobs" in c]
    assert not job_execution, job_execution


def _pss_mb(process: psutil.Process) -> float:
    rollup = Path(f"/proc/{process.pid}/smaps_rollup").read_text()
    return next(float(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")) / 1024


def test_mlflow_is_one_process_its_server_having_become_its_uvicorn(stack):
    mlflow = next(p for p in stack.processes if p.name == "mlflow")
    assert mlflow._popen is not None
    server = psutil.Process(mlflow._popen.pid)
    assert server.cmdline()[1:3] == ["-m", "uvicorn"], server.cmdline()
    assert "mlflow.server.auth:create_app" in server.cmdline()  # the basic-auth app, MLflow's routes in it
    assert server.children(recursive=True) == []


SEARCH = "/api/2.0/mlflow/experiments/search?max_results=1"


def test_mlflow_answers_only_the_stacks_user_whose_password_is_kept_owner_only(stack, stack_settings):
    credentials = stack.mlflow_credentials
    assert credentials is not None and credentials.username == "normlab"
    assert stack_settings.mlflow_password_path.read_text().strip() == credentials.password
    for private in (stack_settings.mlflow_password_path, stack_settings.data_dir / "mlflow_auth.ini"):
        assert private.stat().st_mode & 0o777 == 0o600, private
    # The first check of a password is a full hash: seconds on a loaded 2-core machine.
    with httpx.Client(base_url=str(stack_settings.mlflow_tracking_uri), timeout=60) as http:
        assert http.get(SEARCH).status_code == 401
        assert http.post("/api/2.0/mlflow/experiments/create", json={"name": "anyone"}).status_code == 401
        assert http.get(SEARCH, auth=(credentials.username, "not-the-password")).status_code == 401
        assert http.get(SEARCH, auth=(credentials.username, credentials.password)).status_code == 200
        assert http.get("/health").status_code == 200  # what the stack and /readyz probe


def test_jobs_on_the_head_sign_in_to_mlflow_without_the_password_in_their_runtime_env(stack, stack_settings):
    from ray.job_submission import JobStatus, JobSubmissionClient

    credentials = stack.mlflow_credentials
    assert credentials is not None
    assert all(credentials.password not in value for value in stack.dispatcher.driver_env.values())
    client = JobSubmissionClient(
        stack_settings.ray_dashboard_url, headers={"Authorization": f"Bearer {stack.ray_token}"}
    )
    # What a study driver and its trials do first: create their experiment and runs through MLflow's client.
    code = (
        "from mlflow.tracking import MlflowClient; "
        f"client = MlflowClient('{stack_settings.mlflow_tracking_uri}'); "
        "run = client.create_run(client.create_experiment('signed-in-by-the-head')); "
        "client.log_metric(run.info.run_id, 'val_accuracy', 0.5); print('logged', run.info.run_id)"
    )
    job = client.submit_job(entrypoint=f'python -c "{code}"')
    finished = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}
    assert wait_until(lambda: client.get_job_status(job) in finished, timeout=180, interval=1)
    logs = client.get_job_logs(job)
    assert client.get_job_status(job) == JobStatus.SUCCEEDED, logs
    assert "logged" in logs and credentials.password not in logs
    warm = next(p for p in stack.processes if p.name == "warm-drivers")
    assert warm._popen is not None  # the drivers it forks run with its environment until they take the job's
    assert psutil.Process(warm._popen.pid).environ()["MLFLOW_TRACKING_USERNAME"] == credentials.username


def test_the_ray_head_is_watched_by_a_lean_process_whose_children_are_the_heads(stack):
    head = _head_processes(stack)[0]
    # `ray start --block` hands over at its first check on the head's processes, a second after it started.
    assert wait_until(lambda: "ray_watch.py" in " ".join(head.cmdline()), timeout=30), head.cmdline()
    assert _pss_mb(head) < 20, "the head's watcher holds more than an interpreter"
    names = {name.split("=")[0] for name in head.cmdline()[4:]}
    assert {"gcs_server", "raylet", "dashboard"} <= names
    assert {p.pid for p in head.children()} == {int(arg.split("=")[1]) for arg in head.cmdline()[4:]}


def test_a_job_runs_on_the_loopback_head(stack, stack_settings):
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(
        stack_settings.ray_dashboard_url, headers={"Authorization": f"Bearer {stack.ray_token}"}
    )
    job = client.submit_job(
        entrypoint="python -c \"import ray; ray.init(); print('answer', ray.get(ray.remote(lambda: 41).remote()) + 1)\""
    )
    finished = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}
    assert wait_until(lambda: client.get_job_status(job) in finished, timeout=180, interval=1)
    logs = client.get_job_logs(job)
    assert client.get_job_status(job) == JobStatus.SUCCEEDED, logs
    assert "answer 42" in logs


def test_every_server_of_the_embedded_ray_head_listens_on_loopback_only(stack, stack_settings):
    expected_ports = {
        stack_settings.ray_gcs_port,
        stack_settings.ray_dashboard_port,
        stack_settings.ray_dashboard_agent_listen_port,
        stack_settings.ray_client_server_port,
    }
    # The agents and the client server come up after `ray start` reports the head started.
    assert wait_until(
        lambda: expected_ports <= {port for _, port, _ in _listening(_head_processes(stack))}, timeout=90
    ), _listening(_head_processes(stack))
    time.sleep(2)  # the servers started beside the agents (metrics, runtime env) are up by now
    listening = _listening(_head_processes(stack))
    exposed = [entry for entry in listening if not _is_loopback(entry[0])]
    assert exposed == [], f"listening beyond loopback: {exposed}"
    assert len(listening) >= len(expected_ports)


def test_a_second_serve_attaches_to_the_running_mlflow_and_ray_and_leaves_them_running(stack, stack_settings):
    with local_stack(stack_settings) as second:
        assert second.processes == []  # nothing started, so nothing to stop
        # Its jobs may run on another machine's head: they import their drivers themselves.
        assert "NORMLAB_WARM_DRIVER_SOCKET" not in second.dispatcher.driver_env
        assert (second.mlflow, second.ray) == (Origin.ATTACHED, Origin.ATTACHED)
        console = Console(record=True, width=200)
        console.print(startup_banner(stack_settings, mlflow=second.mlflow, ray=second.ray))
        assert console.export_text().count("attached: it was already running") == 2
    assert http_ok(f"{stack_settings.mlflow_tracking_uri}/health")
    assert http_ok(
        f"{stack_settings.ray_dashboard_url}/api/version",
        headers={"Authorization": f"Bearer {stack.ray_token}"},
    )


def test_api_only_uses_the_running_mlflow_and_ray_and_starts_nothing(stack, stack_settings):
    with local_stack(stack_settings, api_only=True) as api_only:
        assert api_only.processes == []
        assert (api_only.mlflow, api_only.ray) == (Origin.ATTACHED, Origin.ATTACHED)
        assert api_only.dispatcher.dashboard_url == stack_settings.ray_dashboard_url


def test_a_running_head_that_refuses_the_token_is_not_replaced_and_the_error_names_the_fix(
    stack, stack_settings
):
    other = stack_settings.model_copy(update={"ray_auth_token": SecretStr("not-the-cluster-token")})
    for api_only in (False, True):
        with (
            pytest.raises(StackUnavailableError, match="NORMLAB_RAY_AUTH_TOKEN") as refused,
            local_stack(other, api_only=api_only),
        ):
            pass
        assert "not-the-cluster-token" not in str(refused.value)
        assert stack_settings.ray_dashboard_url in str(refused.value)


def test_readiness_asks_the_real_heads_job_agent_and_starts_no_job(stack, stack_settings):
    from ray.job_submission import JobSubmissionClient

    from service.orchestration.dispatcher import PROBE_SUBMISSION_ID
    from service.orchestration.readiness import ReadinessChecker
    from studies.store import make_engine, upgrade_database

    upgrade_database(str(stack_settings.database_url))
    engine = make_engine(str(stack_settings.database_url))
    try:
        readiness = ReadinessChecker(stack_settings, engine, stack.dispatcher).check()
    finally:
        engine.dispose()
    assert readiness.ready, readiness.problems()
    assert readiness.ray.detail.endswith("takes jobs (its job agent answered)")  # not the weaker "answers"
    client = JobSubmissionClient(
        stack_settings.ray_dashboard_url, headers={"Authorization": f"Bearer {stack.ray_token}"}
    )
    assert PROBE_SUBMISSION_ID not in {job.submission_id for job in client.list_jobs()}
