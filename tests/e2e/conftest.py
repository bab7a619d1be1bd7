"""The real embedded stack for end-to-end tests: `normlab serve` as a user runs it (MLflow server with its
sign-in, Ray head with token auth, API), on free loopback ports, in a throwaway data dir."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from service.stack.processes import http_ok, private_serve_environment, wait_until
from studies.store import list_trials, make_engine, session_scope

REPO = Path(__file__).resolve().parents[2]
API_TOKEN = "e2e-" + uuid.uuid4().hex
# The stacks these tests start accept plugins (tests/e2e/test_plugin_study.py), sent with this token.
PLUGIN_TOKEN = "e2e-plugin-" + uuid.uuid4().hex
# The MLflow user of every stack these tests start, given as the API token is, so that the tests' own MLflow
# clients (which read these variables) can look at what trials logged. A stack that generates its own:
# tests/service/stack/test_local_stack.py.
MLFLOW_CREDENTIALS = {
    "MLFLOW_TRACKING_USERNAME": "e2e",
    "MLFLOW_TRACKING_PASSWORD": "e2e-" + uuid.uuid4().hex,
}


@dataclass
class RunningService:
    api_url: str
    mlflow_url: str
    ray_dashboard_url: str
    data_dir: Path
    database_url: str
    token: str
    process: subprocess.Popen
    log_path: Path
    ray_temp: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.api_url, timeout=30)

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def plugin_auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {PLUGIN_TOKEN}"}

    def tune_trial_configs(self, study_id: str) -> list[dict]:
        """The config Tune ran each trial of the study with (its params.json in Tune's storage)."""
        paths = sorted((self.data_dir / "ray_results" / study_id).glob("*/*/params.json"))
        return [json.loads(path.read_text()) for path in paths]

    def log_tail(self, lines: int = 80) -> str:
        """The end of `normlab serve`'s output, each of its logs' last lines, then the last lines of the two
        newest study drivers' output (their Ray jobs' logs): what a failed test needs to say why."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        logs = self.data_dir / "logs"
        for extra in sorted(logs.glob("*.log")) if logs.exists() else []:
            text += f"\n--- {extra.name} ---\n" + "\n".join(
                extra.read_text(errors="replace").splitlines()[-20:]
            )
        text = "\n".join(text.splitlines()[-lines:])
        drivers = sorted(
            self.ray_temp.glob("session_*/logs/job-driver-*.log"), key=lambda p: p.stat().st_mtime
        )
        for driver in drivers[-2:]:
            text += f"\n--- {driver.name} ---\n" + "\n".join(
                driver.read_text(errors="replace").splitlines()[-30:]
            )
        return text

    def cancel_unfinished_studies(self) -> list[str]:
        """Cancel every study still queued or running (the ids): a study a failed test left behind would
        hold the stack's CPU slots and fail the tests after it on the same stack."""
        cancelled = []
        with self.client() as client:
            for status in ("queued", "running"):
                listed = client.get("/studies", params={"status": status, "limit": 1000}, headers=self.auth())
                for study in listed.json() if listed.status_code == 200 else []:
                    client.post(f"/studies/{study['id']}/cancel", headers=self.auth())
                    cancelled.append(study["id"])
        return cancelled


def serve_environment(data_dir: Path, ray_temp: Path) -> dict[str, str]:
    return {
        **private_serve_environment(data_dir, ray_temp, api_token=API_TOKEN),
        **MLFLOW_CREDENTIALS,
        "NORMLAB_ALLOW_PLUGINS": "true",
        "NORMLAB_PLUGIN_TOKEN": PLUGIN_TOKEN,
    }


@pytest.fixture(scope="module", autouse=True)
def mlflow_sign_in() -> Iterator[None]:
    """The tests' MLflow clients sign in to the stacks' MLflow as the stacks' own processes do."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in MLFLOW_CREDENTIALS.items():
            patch.setenv(name, value)
        yield


def start_serve(env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """`normlab serve` as a user starts it, in its own process group (so a test can send it Ctrl-C)."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "normlab"), "serve"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


_STARTED: list[RunningService] = []  # the session's stack, once a test has asked for it


@pytest.fixture(scope="module", autouse=True)
def no_study_outlives_its_module() -> Iterator[None]:
    """After each module, cancel what its tests left queued or running on the session's stack (a test that
    failed while waiting on its study), so that the next module finds the CPU slots free."""
    yield
    for service in _STARTED:
        if service.process.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if left := service.cancel_unfinished_studies():
                    print(f"cancelled studies left unfinished: {', '.join(left)}")


@pytest.fixture(scope="session")
def running_service(tmp_path_factory) -> RunningService:
    data_dir = tmp_path_factory.mktemp("normlab-data")
    # Ray's unix sockets live under its temp dir; keep the path short (107-byte limit).
    ray_temp = Path("/tmp") / f"nl-e2e-{uuid.uuid4().hex[:6]}"
    env = serve_environment(data_dir, ray_temp)
    log_path = data_dir / "serve.log"
    process = start_serve(env, log_path)
    service = RunningService(
        api_url=f"http://127.0.0.1:{env['NORMLAB_API_PORT']}",
        mlflow_url=f"http://127.0.0.1:{env['NORMLAB_MLFLOW_PORT']}",
        ray_dashboard_url=f"http://127.0.0.1:{env['NORMLAB_RAY_DASHBOARD_PORT']}",
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'normlab.db'}",
        token=API_TOKEN,
        process=process,
        log_path=log_path,
        ray_temp=ray_temp,
    )
    _STARTED.append(service)
    up = wait_until(
        lambda: process.poll() is not None or http_ok(f"{service.api_url}/healthz"), timeout=300, interval=1
    )
    if not up or process.poll() is not None:
        _shutdown(process)
        pytest.fail(f"`normlab serve` did not come up:\n{service.log_tail()}")
    yield service
    _shutdown(process)
    shutil.rmtree(ray_temp, ignore_errors=True)


def _shutdown(process: subprocess.Popen) -> None:
    """Ctrl-C, as a user would; the launcher must stop MLflow and Ray itself."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    time.sleep(0.5)


# ------------------------------------------------------------------- helpers for tests that break the stack


def stack_processes(service: RunningService) -> list[psutil.Process]:
    """Every live process `normlab serve` started for `service` (MLflow, the Ray head and its workers)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return [
            p
            for p in psutil.Process(service.process.pid).children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE
        ]
    return []


def trial_processes(service: RunningService) -> list[psutil.Process]:
    """The Ray actor processes trials run in: Tune's function trainables (`ray::ImplicitFunc...`) and the
    warm trial hosts that train CPU trials for them (`ray::TrialHost...`)."""
    found = []
    for process in stack_processes(service):
        with contextlib.suppress(psutil.NoSuchProcess):
            cmdline = " ".join(process.cmdline())
            if "ImplicitFunc" in cmdline or "TrialHost" in cmdline:
                found.append(process)
    return found


def mlflow_process_group(service: RunningService) -> int:
    """The process group of the stack's MLflow server (the launcher starts it in a session of its own): the
    stack's process listening on MLflow's port, whatever its command line became (the server execs into its
    uvicorn)."""
    port = int(service.mlflow_url.rsplit(":", 1)[1])
    for process in stack_processes(service):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            listening = {
                c.laddr.port for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN
            }
            if port in listening:
                group = os.getpgid(process.pid)
                assert group != os.getpgid(service.process.pid), "MLflow shares the launcher's process group"
                return group
    raise AssertionError(f"no MLflow server on port {port} among the stack's processes")


@contextlib.contextmanager
def paused_process_group(group: int, seconds: float) -> Iterator[None]:
    """SIGSTOP on a process group (a server and its workers) for `seconds`, SIGCONT after, even on failure."""
    os.killpg(group, signal.SIGSTOP)
    started = time.monotonic()
    try:
        yield
        time.sleep(max(0.0, started + seconds - time.monotonic()))
    finally:
        os.killpg(group, signal.SIGCONT)


def study_trials(service: RunningService, study_id: str) -> list:
    """The study's trial rows as the API's database holds them now."""
    engine = make_engine(service.database_url)
    try:
        with session_scope(engine, readonly=True) as session:
            return list_trials(session, study_id=study_id)
    finally:
        engine.dispose()
