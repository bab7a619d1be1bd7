"""`normlab serve`: the whole embedded stack in one command, stopped cleanly by Ctrl-C.

Starts what the settings do not point elsewhere: an MLflow server (SQLite backend, with its sign-in:
service.stack.mlflow_auth) unless one answers at MLFLOW_TRACKING_URI, a local Ray head (token auth on,
loopback only) unless RAY_ADDRESS is set or a head already answers at the configured dashboard port, then
the API with its reconcile loop. A service found running is attached to and left running on exit.
`--api-only` starts neither and fails, naming the fix, unless both answer (restarting only the API). In
docker-compose the same command runs with RAY_ADDRESS and MLFLOW_TRACKING_URI set, so it starts only the API.

Stopping: Ctrl-C, SIGTERM (supervisors, `docker stop`) and SIGHUP (the terminal closed) all stop the
reconcile loop and the API first (open requests get _API_GRACE_S), then what was started here, everything
at once: SIGTERM, at most STOP_GRACE_S, SIGKILL. One handler takes these signals from start to exit
(service.stack.stop_signals): during start-up the first one interrupts the start, later the main thread, which only polls
for it, stops everything in order; another signal while that runs skips the waits. The API runs in a
daemon thread (service.api.server), so no request, however stuck, holds up the stop or the exit, and
should anything else hang, the process exits STOP_DEADLINE_S after the signal all the same. A launcher
killed outright leaves the stop to its guard, or to the next start (service.stack.local_stack says how).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import urlparse

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from sqlalchemy.engine import make_url

from service.api.mlflow_links import QUIET_RUN_URLS_ENV, mlflow_ui_url
from service.api.server import ApiServer, api_config
from service.auth import (
    MlflowCredentials,
    api_token_source,
    ensure_mlflow_credentials,
    ensure_ray_auth_token,
    mlflow_password_source,
    ray_auth_token_source,
)
from service.orchestration.dispatcher import RayJobDispatcher
from service.orchestration.readiness import Readiness, ReadinessChecker
from service.orchestration.reconcile import StudyReconciler
from service.settings import Settings
from service.stack.local_stack import (
    RaySessions,
    StartedStack,
    default_ray_temp_dir,
    mlflow_server,
    ray_head,
    stop_stale_stacks,
    warm_driver_server,
)
from service.stack.mlflow_auth import auth_server_env, check_sign_in
from service.stack.preflight import check_ports, planned_ports
from service.stack.private_files import PrivateDirError, prepare_data_dir, private_umask
from service.stack.probe import Answer, StackUnavailableError, is_http_url, mlflow_answer, ray_answer
from service.stack.processes import ManagedProcess, ProcessStartError, http_ok
from service.stack.stop_signals import (
    StopSignals,
    exit_if_the_stop_hangs,
    hurried_by_signals,
    stopped_by_signals,
)

__all__ = [
    "LocalStack",
    "Origin",
    "driver_environment",
    "local_stack",
    "serve",
    "startup_banner",
]

log = logging.getLogger(__name__)
# Piped into a log (CI, `make run > log`), a banner line must not wrap: it is copied from there.
console = Console(width=None if sys.stdout.isatty() else 160)
# Seconds uvicorn waits for open requests once told to stop (None: forever), then cancels them: plenty for
# a request that only reads or writes the database; one stuck (on a lock) would not finish in a minute.
_API_GRACE_S = 2


def _say(message: str) -> None:
    """Print, unless the terminal is gone (SIGHUP): stopping must not fail for want of somewhere to say so."""
    with contextlib.suppress(OSError):
        console.print(message)


class Origin(str, Enum):
    """How `normlab serve` came by MLflow or Ray (the banner says it)."""

    STARTED = "started here; Ctrl-C stops it"
    ATTACHED = "attached: it was already running and keeps running after Ctrl-C"
    CONFIGURED = "configured elsewhere; not started here"


@dataclass
class LocalStack:
    settings: Settings
    ray_token: str
    dispatcher: RayJobDispatcher
    processes: list[ManagedProcess]  # what this stack started, and stops on exit
    mlflow: Origin
    ray: Origin
    # The local MLflow's admin, whom the API's process must sign in as too (None: no sign-in, or an MLflow
    # configured elsewhere, whose credentials come from the environment as they are).
    mlflow_credentials: MlflowCredentials | None = None


def driver_environment(settings: Settings) -> dict[str, str]:
    """What a study driver needs inside the cluster to reach the DB, MLflow and the data.

    A database URL that carries a password is NOT sent: Ray shows a job's runtime_env in its dashboard
    and job API. Such clusters set DATABASE_URL on their nodes instead (docker-compose.yml does), and
    the driver reads it from there. MLflow's credentials are not sent either: they are in the environment
    of the Ray head that `normlab serve` starts (compose: of every node), which jobs and trials inherit.
    """
    env = {
        "MLFLOW_TRACKING_URI": str(settings.mlflow_tracking_uri),
        "NORMLAB_DATA_DIR": str(settings.data_dir),
        "NORMLAB_TRIAL_HOSTS": "1" if settings.trial_hosts else "0",
        "NORMLAB_TRAIN_AHEAD": "1" if settings.train_ahead else "0",
        "NORMLAB_CHECKPOINT_EVERY_S": f"{settings.checkpoint_every_s:g}",
        "NORMLAB_WARM_IDLE_S": f"{settings.warm_idle_s:g}",  # how long a trial host waits for work
        **QUIET_RUN_URLS_ENV,  # the driver's and trials' MLflow clients: no run links in the GenAI view
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
def local_stack(
    settings: Settings,
    *,
    api_only: bool = False,
    hurry: threading.Event | None = None,
    api_port: bool = False,
) -> Iterator[LocalStack]:
    """MLflow and Ray for these settings: started here, or attached to when they already answer at their
    configured addresses; on exit only what was started here is stopped (no grace period once `hurry` is set),
    and the Ray session folders the head started here made are removed. `api_only` starts nothing and raises
    StackUnavailableError unless both answer. Before anything starts, every port of what is to start (and
    the API's, with `api_port`) must be free: else PortUnavailableError, one line naming port and setting."""
    prepare_data_dir(settings.data_dir)  # 0700 (and tightened, said once, if an older start left it open)
    token = ensure_ray_auth_token(settings)
    started = StartedStack(settings.data_dir)
    socket_dir: Path | None = None  # the warm driver server's, when this stack starts one
    sessions: RaySessions | None = None  # those of the Ray head started here
    try:
        if api_only:
            mlflow, ray = _require_running(settings, token)
            check_ports(planned_ports(settings, mlflow=False, ray=False, api=api_port))
            credentials = _mlflow_credentials(settings, mlflow)
            _check_mlflow_sign_in(settings, mlflow, credentials)
        else:
            # Before probing: an orphan of a killed launcher must be stopped, not attached to.
            for line in stop_stale_stacks(settings.data_dir):
                _say(f"[yellow]stopped {line}[/]")
            mlflow, ray = _mlflow_origin(settings), _ray_origin(settings, token)
            if ray is Origin.STARTED:
                sessions = _ray_sessions(settings)
            check_ports(
                planned_ports(
                    settings, mlflow=mlflow is Origin.STARTED, ray=ray is Origin.STARTED, api=api_port
                )
            )
            credentials = _mlflow_credentials(settings, mlflow)
            if mlflow is Origin.STARTED:
                _start_mlflow(settings, started, credentials)
            _check_mlflow_sign_in(settings, mlflow, credentials)
            if sessions is not None:
                _start_ray(settings, token, started, sessions, _signed_in_env(credentials))
        driver_env = driver_environment(settings)
        if ray is Origin.STARTED and settings.warm_drivers and sys.platform.startswith("linux"):
            # Unix socket paths are limited to ~107 bytes: the server's lives in a short private dir.
            socket_dir = Path(tempfile.mkdtemp(prefix="normlab-drivers-"))
            driver_env.update(
                _warm_drivers(settings, token, driver_env, started, socket_dir, _signed_in_env(credentials))
            )
        dispatcher = RayJobDispatcher(
            dashboard_url=settings.ray_dashboard_url,
            auth_token=token,
            driver_env=driver_env,
        )
        yield LocalStack(
            settings=settings,
            ray_token=token,
            dispatcher=dispatcher,
            processes=started.processes,
            mlflow=mlflow,
            ray=ray,
            mlflow_credentials=credentials,
        )
    finally:
        stopped = _stop(started, hurry)
        if socket_dir is not None:
            shutil.rmtree(socket_dir, ignore_errors=True)
        if sessions is not None and stopped:  # a head still running writes into its session
            sessions.remove()


def _warm_drivers(
    settings: Settings,
    token: str,
    driver_env: dict[str, str],
    started: StartedStack,
    socket_dir: Path,
    head_env: dict[str, str],
) -> dict[str, str]:
    """Start the warm driver server beside the Ray head this stack started (jobs run on that head); returns
    what tells drivers to use it. Best-effort: without it every study's job runs its driver itself.
    `head_env`: what that head was started with besides (MLflow's credentials), which its jobs inherit."""
    socket_path = socket_dir / "drivers.sock"
    server = warm_driver_server(
        data_dir=settings.data_dir,
        socket_path=socket_path,
        token=token,
        node_ip=settings.ray_host,
        driver_env=driver_env,
        release_after_s=settings.warm_idle_s,
        extra_env=head_env,
    )
    try:
        started.start(server, timeout=60)
    except ProcessStartError as exc:
        log.warning("no warm driver server (each study's job imports its driver itself): %s", exc)
        return {}
    return {"NORMLAB_WARM_DRIVER_SOCKET": str(socket_path)}


def _stop(started: StartedStack, hurry: threading.Event | None = None) -> bool:
    """Stop what was started here; whether all of it stopped."""
    if not started.processes:
        return True
    _say(f"[dim]stopping {', '.join(process.name for process in reversed(started.processes))} ...[/]")
    with hurried_by_signals(hurry, say=_say) as hurry:
        left = started.stop(hurry=hurry)
    if left:
        _say(f"[red]still running after SIGKILL: pids {sorted(process.pid for process in left)}[/]")
    return not left


def _mlflow_origin(settings: Settings) -> Origin:
    """How this stack comes by MLflow: STARTED means it is still to be started (_start_mlflow)."""
    uri = str(settings.mlflow_tracking_uri)
    if not _mlflow_is_local(settings):
        return Origin.CONFIGURED
    answer = mlflow_answer(uri)
    if answer is Answer.UP:
        return Origin.ATTACHED
    if answer is Answer.FOREIGN:
        raise StackUnavailableError(
            f"something that is not an MLflow server answers at {uri}: stop it, or set NORMLAB_MLFLOW_PORT "
            "to a free port (or MLFLOW_TRACKING_URI to a running MLflow server)"
        )
    return Origin.STARTED


def _mlflow_credentials(settings: Settings, mlflow: Origin) -> MlflowCredentials | None:
    """Whom the stack signs in to MLflow as, when the MLflow is the local one (started here, or attached:
    started by another `normlab serve` on this data dir): generated on the first start. None with
    NORMLAB_MLFLOW_AUTH=false, or for an MLflow configured elsewhere (its credentials, if it needs any, come
    from MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD, which MLflow's client reads itself)."""
    if not settings.mlflow_auth or mlflow is Origin.CONFIGURED or not _mlflow_is_local(settings):
        return None
    return ensure_mlflow_credentials(settings)


def _signed_in_env(credentials: MlflowCredentials | None) -> dict[str, str]:
    return credentials.env() if credentials is not None else {}


def _check_mlflow_sign_in(settings: Settings, mlflow: Origin, credentials: MlflowCredentials | None) -> None:
    """Fail now, naming the fix, when the local MLflow refuses the stack's credentials (every trial would log
    nothing); say so when an MLflow this stack attached to answers without any."""
    if credentials is None:
        return
    uri = str(settings.mlflow_tracking_uri)
    asks = check_sign_in(uri, credentials, mlflow_password_source(settings))
    if not asks and mlflow is Origin.ATTACHED:
        log.warning(
            "the MLflow server at %s answers requests without credentials (started without its sign-in): "
            "stop it and start `normlab serve` again to run it with sign-in",
            uri,
        )


def _start_mlflow(settings: Settings, started: StartedStack, credentials: MlflowCredentials | None) -> None:
    uri = str(settings.mlflow_tracking_uri)
    mlflow = mlflow_server(
        data_dir=settings.data_dir,
        host=settings.mlflow_host,
        port=settings.mlflow_port,
        backend_store_uri=settings.mlflow_backend_store_uri,
        artifacts_dir=settings.mlflow_artifacts_dir,
        auth_env=auth_server_env(credentials, settings.data_dir) if credentials is not None else None,
    )
    console.print(f"[dim]starting MLflow on {uri} ...[/]")
    started.start(mlflow, timeout=180)


def _ray_origin(settings: Settings, token: str) -> Origin:
    """How this stack comes by Ray: STARTED means a local head is still to be started (_start_ray)."""
    if settings.ray_address is not None:
        return Origin.CONFIGURED
    url = settings.ray_dashboard_url
    answer = ray_answer(url, token)
    if answer is Answer.UP:
        return Origin.ATTACHED
    if answer is Answer.REFUSED:
        raise StackUnavailableError(_ray_refuses_token(settings, url))
    if answer is Answer.FOREIGN:
        raise StackUnavailableError(
            f"something that is not a Ray head answers at {url}: stop it, or set NORMLAB_RAY_DASHBOARD_PORT "
            "to a free port"
        )
    return Origin.STARTED


def _ray_sessions(settings: Settings) -> RaySessions:
    """The local head's temp dir, and the session folders already in it (not this stack's to remove)."""
    try:
        temp_dir = settings.ray_temp_dir or default_ray_temp_dir(settings.ray_gcs_port)
    except PrivateDirError as exc:  # the default temp dir's parent belongs to someone else
        raise StackUnavailableError(str(exc)) from exc
    return RaySessions.before_start(temp_dir, f"{settings.ray_host}:{settings.ray_gcs_port}")


def _start_ray(
    settings: Settings, token: str, started: StartedStack, sessions: RaySessions, extra_env: dict[str, str]
) -> None:
    """`extra_env`: what the head's processes (and so every job and trial on it) run with besides."""
    head = _ray_head(settings, token, sessions.temp_dir, extra_env)
    console.print(f"[dim]starting a local Ray head (GCS port {settings.ray_gcs_port}) ...[/]")
    try:
        started.start(head, timeout=180)
    finally:
        # Also for a head that failed to start: what it made before it died goes with the stop, and with a
        # guard's or the next start's stop should this launcher be killed.
        sessions.head_pid = head.identity.pid if head.identity is not None else None
        started.note_ray_sessions(sessions)


def _ray_head(
    settings: Settings, token: str, temp_dir: Path, extra_env: dict[str, str] | None = None
) -> ManagedProcess:
    """The local head, every port it and its agents listen on from the settings (service.stack.preflight
    checks the same list before anything starts)."""
    return ray_head(
        data_dir=settings.data_dir,
        token=token,
        gcs_port=settings.ray_gcs_port,
        node_ip=settings.ray_host,
        dashboard_host=settings.ray_dashboard_host,
        dashboard_port=settings.ray_dashboard_port,
        dashboard_agent_listen_port=settings.ray_dashboard_agent_listen_port,
        dashboard_agent_grpc_port=settings.ray_dashboard_agent_grpc_port,
        node_manager_port=settings.ray_node_manager_port,
        object_manager_port=settings.ray_object_manager_port,
        metrics_export_port=settings.ray_metrics_export_port,
        runtime_env_agent_port=settings.ray_runtime_env_agent_port,
        dashboard_metrics_port=settings.ray_dashboard_metrics_port,
        client_server_port=settings.ray_client_server_port,
        min_worker_port=settings.ray_min_worker_port,
        max_worker_port=settings.ray_max_worker_port,
        num_cpus=settings.ray_num_cpus,
        num_gpus=settings.ray_num_gpus,
        temp_dir=temp_dir,
        extra_env=extra_env,
    )


def _require_running(settings: Settings, token: str) -> tuple[Origin, Origin]:
    """--api-only: both services must already answer; every one that does not is named with its fix."""
    problems: list[str] = []
    mlflow = Origin.CONFIGURED  # a file or database tracking URI is no server to ask
    uri = str(settings.mlflow_tracking_uri)
    if is_http_url(uri):
        if mlflow_answer(uri) is Answer.UP:
            mlflow = Origin.ATTACHED
        else:
            problems.append(
                f"no MLflow server answers at {uri}/health: start the whole stack with `normlab serve` "
                "(without --api-only), or set MLFLOW_TRACKING_URI to a running MLflow server"
            )
    url = settings.ray_dashboard_url
    answer = ray_answer(url, token)
    if answer is Answer.REFUSED:
        problems.append(_ray_refuses_token(settings, url))
    elif answer is not Answer.UP:
        problems.append(
            f"no Ray head answers at {url}: start the whole stack with `normlab serve` (without "
            "--api-only), or set RAY_ADDRESS to the cluster's job server (e.g. http://ray-head:8265)"
        )
    if problems:
        raise StackUnavailableError(
            "`normlab serve --api-only` starts neither MLflow nor Ray, and:\n"
            + "\n".join(f"  - {problem}" for problem in problems)
        )
    return mlflow, Origin.ATTACHED


def _ray_refuses_token(settings: Settings, url: str) -> str:
    return (
        f"the Ray head at {url} refuses this stack's Ray token (from {ray_auth_token_source(settings)}): "
        "set NORMLAB_RAY_AUTH_TOKEN to the token that cluster was started with, or, for a head of another "
        "stack, set NORMLAB_RAY_DASHBOARD_PORT and NORMLAB_RAY_GCS_PORT to free ports"
    )


def _normlab_command() -> str:
    """How to run the CLI from any directory: the console script beside this interpreter."""
    script = Path(sys.executable).parent / "normlab"
    return shlex.quote(str(script)) if script.exists() else "normlab"


def _mlflow_ui(settings: Settings) -> str:
    """The experiment list in the training view; a tracking URI that is no server (a file store) as is."""
    uri = str(settings.mlflow_ui_url)
    return mlflow_ui_url(uri) or uri


def startup_banner(
    settings: Settings,
    *,
    mlflow: Origin,
    ray: Origin,
    readiness: Readiness | None = None,
    mlflow_user: str | None = None,
) -> Panel:
    """Where everything is and how to get the API token; never the token (it would land in logs). With
    `readiness`, whether a study could run now, and if not, each part that is not ready and why. With
    `mlflow_user`, the user MLflow's UI asks for and where its password is (never the password)."""
    api = settings.api_url
    normlab = _normlab_command()
    database = make_url(str(settings.database_url)).render_as_string(hide_password=True)
    return Panel.fit(
        "\n".join(
            [
                f"Studies    {api}/   (open in a browser: live studies, results, reports, the catalog)",
                f"API        {api}   (docs: {api}/docs)",
                f"MLflow UI  {_mlflow_ui(settings)}   ({mlflow.value})",
                *_mlflow_sign_in_lines(settings, mlflow_user, normlab),
                f"Ray        {settings.ray_ui_base}   ({ray.value})",
                f"           its dashboard asks for a token: from {escape(ray_auth_token_source(settings))}, "
                f"`{normlab} token --ray` prints it",
                f"Database   {database}",
                *_readiness_lines(readiness, str(api)),
                "",
                f"API token  from {api_token_source(settings)}; `{normlab} token` prints it",
                "",
                "Submit a study:",
                f'  curl -X POST {api}/studies -H "Authorization: Bearer $({normlab} token)" \\',
                "       -H 'Content-Type: application/yaml' --data-binary @studies/examples/quick.yaml",
                f"Results:   curl '{api}/results/digits?format=md'",
                "Stop with Ctrl-C.",
            ]
        ),
        title="NormLab is running",
    )


def _mlflow_sign_in_lines(settings: Settings, user: str | None, normlab: str) -> list[str]:
    if user is None:
        return []
    return [
        f"           sign in as {escape(user)}; password from {mlflow_password_source(settings)}, "
        f"`{normlab} token --mlflow` prints it"
    ]


def _readiness_lines(readiness: Readiness | None, api: str) -> list[str]:
    """The banner's readiness: one line when ready, else one per part that is not (escaped: Ray's words
    and paths may hold what rich takes for markup)."""
    if readiness is None:
        return []
    if readiness.ready:
        return [f"Ready      yes: a study can run now ({api}/readyz says so while it stays true)"]
    lines = [f"[red]NOT READY[/]  studies queue until this is fixed ({api}/readyz says what is not ready):"]
    return lines + [f"           [red]-[/] {escape(problem)}" for problem in readiness.problems()]


def serve(settings: Settings | None = None, *, demo: bool = False, api_only: bool = False) -> None:
    """The stack until a stop signal (or a failure), then nothing left running. It takes the process's stop
    signals meanwhile: call it once, from the main thread, as the CLI does."""
    finished = threading.Event()
    try:
        # Everything the stack writes (databases, logs, Tune results, checkpoints) is this user's only.
        with stopped_by_signals(_say) as signals, private_umask():
            deadline = threading.Thread(
                target=exit_if_the_stop_hangs,
                args=(signals, finished),
                kwargs={"say": _say},
                name="normlab-stop-deadline",
                daemon=True,
            )
            deadline.start()
            _serve(settings or Settings(), signals, demo=demo, api_only=api_only)
    finally:
        finished.set()
        # Everything is stopped: spare the exit the cyclic collection of some 1,600 modules' objects,
        # seconds on a busy 2-core machine (refcounting still finalizes what it finalizes).
        gc.freeze()


def _serve(settings: Settings, signals: StopSignals, *, demo: bool, api_only: bool) -> None:
    from service.api.app import create_app
    from service.auth import ensure_api_token
    from studies.store import make_engine, upgrade_database

    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Per-request lines would bury the banner and the demo's progress bar; `NORMLAB_LOG_LEVEL=debug` shows them.
    verbose = settings.log_level.lower() == "debug"
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose else logging.WARNING)
    # Alembic says at INFO what it does on every start (its plugins, the dialect, each revision applied),
    # lines that came before the banner; its warnings still show, and a failed migration raises.
    logging.getLogger("alembic").setLevel(logging.DEBUG if verbose else logging.WARNING)
    # The reconcile loop's MLflow client closes runs, and would print a GenAI-view link for each.
    os.environ.update(QUIET_RUN_URLS_ENV)
    prepare_data_dir(settings.data_dir)  # before the token file and the database are written into it
    api_token = ensure_api_token(settings)
    upgrade_database(str(settings.database_url))
    with local_stack(settings, api_only=api_only, hurry=signals.hurry, api_port=True) as stack:
        if stack.mlflow_credentials is not None:
            # MLflow's client reads them from here: the readiness probe, and the runs the reconcile loop closes.
            os.environ.update(stack.mlflow_credentials.env())
        app = create_app(settings=settings, dispatcher=stack.dispatcher)
        api = ApiServer(api_config(app, settings, grace_s=_API_GRACE_S, access_log=verbose))
        engine = make_engine(str(settings.database_url))
        reconciler = StudyReconciler(
            engine,
            stack.dispatcher,
            interval_s=settings.poll_interval_s,
            max_running=settings.max_running_studies,
            settings=settings,
        )
        try:
            reconciler.start()
            # No trial host starts here: the first CPU study's driver starts them (an idle stack stays lean).
            app.state.on_study_queued = reconciler.wake  # a POSTed study starts now, not at the next tick
            # What /readyz will say, checked once here: the banner says whether a study could run now.
            readiness = ReadinessChecker(settings, engine, stack.dispatcher).check()
            console.print(
                startup_banner(
                    settings,
                    mlflow=stack.mlflow,
                    ray=stack.ray,
                    readiness=readiness,
                    mlflow_user=stack.mlflow_credentials.username if stack.mlflow_credentials else None,
                )
            )
            if demo:
                threading.Thread(target=_run_demo, args=(settings, api_token), daemon=True).start()
            signals.interrupting = False  # from here on the main thread polls for the stop
            if not signals.requested.is_set():
                api.start()
                api.wait_until(signals.requested)
        finally:
            # The loop first: once MLflow and Ray begin to stop it must submit, resubmit or fail nothing.
            reconciler.stop(wait_s=0)
            if not api.stop(grace_s=_API_GRACE_S, hurry=signals.hurry):
                log.warning("the API did not stop in time; its open requests end with the process")
            reconciler.stop(wait_s=0.5)  # a tick's write may finish; one stuck on a lock or Ray is left
        if api.error is not None:
            raise api.error  # uvicorn could not start (its log says why): stop the stack and fail
        if not signals.requested.is_set():
            log.error("the API stopped by itself: stopping everything")


def _run_demo(settings: Settings, api_token: str) -> None:
    """Submit the quick example once the API answers, follow it with a progress bar, print the table."""
    from importlib.resources import files

    from service.cli.client import follow_study, print_results, submit_spec_text
    from service.stack.processes import wait_until

    api_url = str(settings.api_url)
    if not wait_until(lambda: http_ok(f"{api_url}/healthz"), timeout=120):
        console.print("[red]the API did not come up; demo not submitted[/]")
        return
    spec_text = files("studies").joinpath("examples/quick.yaml").read_text()
    study = submit_spec_text(api_url, api_token, spec_text, content_type="application/yaml")
    final = follow_study(api_url, study["id"])
    if final["status"] == "succeeded":
        print_results(api_url, final["dataset"], study_id=study["id"])
    else:
        console.print(f"[red]demo study ended {final['status']}[/]: {final.get('error')}")
