"""`normlab serve`: the whole embedded stack in one command, stopped cleanly by Ctrl-C.

Starts what the settings do not point elsewhere: an MLflow server (SQLite backend) unless one answers at
MLFLOW_TRACKING_URI, a local Ray head (token auth on) unless RAY_ADDRESS is set, then the API with its
reconcile loop. In docker-compose the same command runs with RAY_ADDRESS and MLFLOW_TRACKING_URI set, so
it starts only the API.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlparse

from rich.console import Console
from rich.panel import Panel
from sqlalchemy.engine import make_url

from service.auth import ensure_ray_auth_token
from service.background import StudyReconciler
from service.dispatcher import RayJobDispatcher
from service.local_stack import mlflow_server, ray_head
from service.processes import ManagedProcess, http_ok
from service.settings import Settings

__all__ = ["LocalStack", "driver_environment", "local_stack", "serve"]

log = logging.getLogger(__name__)
console = Console()


@dataclass
class LocalStack:
    settings: Settings
    ray_token: str
    dispatcher: RayJobDispatcher
    processes: list[ManagedProcess]


def driver_environment(settings: Settings) -> dict[str, str]:
    """What a study driver needs inside the cluster to reach the DB, MLflow and the data.

    A database URL that carries a password is NOT sent: Ray shows a job's runtime_env in its dashboard
    and job API. Such clusters set DATABASE_URL on their nodes instead (docker-compose.yml does), and
    the driver reads it from there.
    """
    env = {
        "MLFLOW_TRACKING_URI": str(settings.mlflow_tracking_uri),
        "NORMLAB_DATA_DIR": str(settings.data_dir),
    }
    if make_url(str(settings.database_url)).password is None:
        env["DATABASE_URL"] = str(settings.database_url)
    return env


def _mlflow_is_local(settings: Settings) -> bool:
    parsed = urlparse(str(settings.mlflow_tracking_uri))
    return parsed.scheme in ("http", "https") and parsed.hostname in (
        "127.0.0.1",
        "localhost",
        settings.mlflow_host,
    )


@contextlib.contextmanager
def local_stack(settings: Settings) -> Iterator[LocalStack]:
    """Start (or reuse) MLflow and Ray for these settings; stop what we started on exit."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    token = ensure_ray_auth_token(settings)
    started: list[ManagedProcess] = []
    try:
        if _mlflow_is_local(settings) and not http_ok(f"{settings.mlflow_tracking_uri}/health"):
            mlflow = mlflow_server(
                data_dir=settings.data_dir,
                host=settings.mlflow_host,
                port=settings.mlflow_port,
                backend_store_uri=settings.mlflow_backend_store_uri,
                artifacts_dir=settings.mlflow_artifacts_dir,
            )
            console.print(f"[dim]starting MLflow on {settings.mlflow_tracking_uri} ...[/]")
            mlflow.start(timeout=180)
            started.append(mlflow)
        if settings.ray_address is None:
            head = ray_head(
                data_dir=settings.data_dir,
                token=token,
                gcs_port=settings.ray_gcs_port,
                node_ip=settings.ray_host,
                dashboard_host=settings.ray_dashboard_host,
                dashboard_port=settings.ray_dashboard_port,
                dashboard_agent_listen_port=settings.ray_dashboard_agent_listen_port,
                client_server_port=settings.ray_client_server_port,
                min_worker_port=settings.ray_min_worker_port,
                max_worker_port=settings.ray_max_worker_port,
                num_cpus=settings.ray_num_cpus,
                num_gpus=settings.ray_num_gpus,
                temp_dir=settings.ray_temp_dir,
            )
            console.print(f"[dim]starting a local Ray head (GCS port {settings.ray_gcs_port}) ...[/]")
            head.start(timeout=180)
            started.append(head)
        dispatcher = RayJobDispatcher(
            dashboard_url=settings.ray_dashboard_url,
            auth_token=token,
            driver_env=driver_environment(settings),
        )
        yield LocalStack(settings=settings, ray_token=token, dispatcher=dispatcher, processes=started)
    finally:
        for process in reversed(started):
            console.print(f"[dim]stopping {process.name} ...[/]")
            process.stop()


def _banner(settings: Settings, api_token: str) -> Panel:
    api = settings.api_url
    return Panel.fit(
        "\n".join(
            [
                f"API        {api}   (docs: {api}/docs)",
                f"MLflow UI  {settings.mlflow_tracking_uri}",
                f"Ray        {settings.ray_dashboard_url}",
                f"Database   {settings.database_url}",
                "",
                f"API token  {api_token}",
                "",
                "Submit a study:",
                f'  curl -X POST {api}/studies -H "Authorization: Bearer $(cat {settings.api_token_path})" \\',
                "       -H 'Content-Type: application/yaml' --data-binary @studies/examples/quick.yaml",
                f"Results:   curl '{api}/results/digits?format=md'",
                "Stop with Ctrl-C.",
            ]
        ),
        title="NormLab is running",
    )


def serve(settings: Settings | None = None, *, demo: bool = False) -> None:
    import uvicorn

    from service.app import create_app
    from service.auth import ensure_api_token
    from service.store import make_engine, upgrade_database

    settings = settings or Settings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Per-request lines would bury the banner and the demo's progress bar; `NORMLAB_LOG_LEVEL=debug` shows them.
    verbose = settings.log_level.lower() == "debug"
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose else logging.WARNING)
    api_token = ensure_api_token(settings)
    upgrade_database(str(settings.database_url))
    with local_stack(settings) as stack:
        app = create_app(settings=settings, dispatcher=stack.dispatcher)
        reconciler = StudyReconciler(
            make_engine(str(settings.database_url)),
            stack.dispatcher,
            interval_s=settings.poll_interval_s,
            max_running=settings.max_running_studies,
        )
        reconciler.start()
        console.print(_banner(settings, api_token))
        if demo:
            threading.Thread(target=_run_demo, args=(settings, api_token), daemon=True).start()
        try:
            uvicorn.run(
                app,
                host=settings.api_host,
                port=settings.api_port,
                log_level=settings.log_level,
                access_log=verbose,
            )
        finally:
            reconciler.stop()


def _run_demo(settings: Settings, api_token: str) -> None:
    """Submit the quick example once the API answers, follow it with a progress bar, print the table."""
    from importlib.resources import files

    from service.cli import follow_study, print_results, submit_spec_text
    from service.processes import wait_until

    if not wait_until(lambda: http_ok(f"{settings.api_url}/healthz"), timeout=120):
        console.print("[red]the API did not come up; demo not submitted[/]")
        return
    spec_text = files("studies").joinpath("examples/quick.yaml").read_text()
    study = submit_spec_text(settings.api_url, api_token, spec_text, content_type="application/yaml")
    final = follow_study(settings.api_url, study["id"])
    if final["status"] == "succeeded":
        print_results(settings.api_url, final["dataset"], study_id=study["id"])
    else:
        console.print(f"[red]demo study ended {final['status']}[/]: {final.get('error')}")
