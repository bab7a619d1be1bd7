"""The embedded stack `make run` starts on one machine: an MLflow server and a Ray head, on loopback, and
what makes sure none of it outlives the `normlab serve` that started it.

The same functions start the stack in the end-to-end tests, so what is tested is what users run.

Nothing left running, however the launcher ends:
- Stopped (Ctrl-C, SIGTERM, SIGHUP), it stops each child with everything the child started
  (service.stack.processes: SIGTERM, at most STOP_GRACE_S, SIGKILL); a second signal skips the wait.
- Killed (SIGKILL, OOM killer), it cannot. While it runs, a StackRecord in <data dir>/run/ names what it
  started (pid, start time and environment mark of each child) and a StackGuard, a small process in a
  session of its own that holds the read end of a pipe only the launcher writes to, waits: when the
  launcher dies the pipe closes and the guard stops everything the record names. On Linux the kernel
  also sends each child SIGTERM at once (PR_SET_PDEATHSIG).
- Should the guard die with it, the next `normlab serve` on that data dir stops what a record of a dead
  launcher names before it starts anything (stop_stale_stacks), so it never attaches to an orphan.
A record whose launcher still runs belongs to another `normlab serve`: it is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from service.stack.private_files import private_tmp_dir
from service.stack.processes import (
    STOP_GRACE_S,
    ManagedProcess,
    ProcessIdentity,
    marked_processes,
    stop_all,
    terminate,
    venv_executable,
)

__all__ = [
    "RaySessions",
    "StackGuard",
    "StackRecord",
    "StartedStack",
    "default_ray_temp_dir",
    "mlflow_server",
    "ray_auth_env",
    "ray_head",
    "ray_head_env",
    "ray_worker",
    "stop_stale_stacks",
    "warm_driver_server",
]


def ray_auth_env(token: str) -> dict[str, str]:
    """Token authentication stays on (Ray's default for local clusters since 2.59)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}


def _node_env(token: str) -> dict[str, str]:
    # Jobs run `python -m workers.driver`: put this environment's interpreter first on their PATH.
    return {
        **ray_auth_env(token),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


# The node addresses `ray start` replaces with the machine's outward address (127.0.0.2 and the rest of
# 127/8 it keeps as given).
_RAY_LOCALHOST_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def _loopback_only_env(node_ip: str) -> dict[str, str]:
    """Ray swaps a localhost --node-ip-address for the machine's outward address (and its GCS, raylet,
    agents and metrics servers then listen on every interface) unless it runs in its single-machine
    mode, whose switch is this variable. Off, the node keeps 127.0.0.1 and every server binds to it;
    such a head accepts no worker nodes, which a loopback head could not reach anyway."""
    return {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"} if node_ip in _RAY_LOCALHOST_NAMES else {}


def _prompt_stop_env() -> dict[str, str]:
    """On SIGTERM `ray start --block` first drains the node for 30 s (for Ray Serve proxies, which this
    stack has none of); without the drain it stops its processes at once."""
    return {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}


def ray_head_env(token: str, node_ip: str) -> dict[str, str]:
    """What `ray start --head` runs with here, and so what every job on that head inherits."""
    return {**_node_env(token), **_loopback_only_env(node_ip), **_prompt_stop_env()}


def _resource_args(num_cpus: int | None, num_gpus: int | None) -> list[str]:
    """`ray start` flags for the node's resources; None lets Ray detect them."""
    args = []
    if num_cpus is not None:
        args.append(f"--num-cpus={num_cpus}")
    if num_gpus is not None:
        args.append(f"--num-gpus={num_gpus}")
    return args


# MLflow's job execution, a job runner and seven huey consumer processes (~1.4 GB PSS idle), runs GenAI
# jobs only (LLM judges, GenAI evaluation, issue detection, prompt optimisation): none of NormLab's.
_MLFLOW_SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def mlflow_server(
    *,
    data_dir: Path,
    host: str,
    port: int,
    backend_store_uri: str | None = None,
    artifacts_dir: Path | None = None,
    workers: int = 1,
    auth_env: dict[str, str] | None = None,
) -> ManagedProcess:
    """`mlflow server` on `host`:`port`; with `auth_env` (service.stack.mlflow_auth.auth_server_env) its
    basic-auth app, which asks every request but /health for a user and password."""
    backend = backend_store_uri or f"sqlite:///{data_dir / 'mlflow.db'}"
    artifacts = artifacts_dir or data_dir / "mlartifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = [
        # `mlflow server`, which becomes its uvicorn once its stores are ready (that module says why).
        sys.executable,
        "-m",
        "service.stack.mlflow_start",
        "server",
        "--backend-store-uri",
        backend,
        "--artifacts-destination",
        str(artifacts),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    if auth_env is not None:
        argv[4:4] = ["--app-name", "basic-auth"]  # an option of `server`: after it, before the others
    return ManagedProcess(
        name="mlflow",
        argv=argv,
        log_path=data_dir / "logs" / "mlflow.log",
        env={**_MLFLOW_SERVER_ENV, **(auth_env or {})},
        health_url=f"http://{host}:{port}/health",
    )


def default_ray_temp_dir(gcs_port: int) -> Path:
    """Where a local head keeps its session files unless told: Ray makes that dir and its session dirs 0777,
    so it lies in a parent only this user can enter; short, because Unix socket paths (Ray's session dirs
    hold some) are limited to ~107 bytes. Raises PrivateDirError when that parent cannot be private."""
    return private_tmp_dir() / f"ray-{gcs_port}"


@dataclass
class RaySessions:
    """The session folders a Ray head this stack starts leaves under its temp dir, removed once it stopped.

    Ray names each session folder after the process that made it (`session_<time>_<pid>`: the `ray start`
    that `ray_head` runs), and keeps beside them `session_latest` and `prom_metrics_service_discovery.json`
    (links into the latest one) and `ray_current_cluster` (the head's GCS address). Only what this stack's
    head made goes: a folder that was there before it started, or that another process made (another stack
    given the same temp dir), stays, and so does every link and file that still points at one of those.
    """

    temp_dir: Path
    gcs_address: str  # host:port, as ray_current_cluster holds it
    existing: frozenset[str]  # session folders there before the head started
    head_pid: int | None = None  # set once the head runs

    @classmethod
    def before_start(cls, temp_dir: Path, gcs_address: str) -> RaySessions:
        return cls(temp_dir, gcs_address, frozenset(cls._sessions(temp_dir)))

    def to_json(self) -> dict[str, Any]:
        """What a StackRecord keeps, so that a guard or the next start removes them after a killed
        launcher."""
        return {
            "temp_dir": str(self.temp_dir),
            "gcs_address": self.gcs_address,
            "existing": sorted(self.existing),
            "head_pid": self.head_pid,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RaySessions:
        head_pid = raw.get("head_pid")
        return cls(
            Path(raw["temp_dir"]),
            str(raw["gcs_address"]),
            frozenset(raw["existing"]),
            int(head_pid) if head_pid is not None else None,
        )

    @staticmethod
    def _sessions(temp_dir: Path) -> list[str]:
        try:
            return [
                p.name
                for p in temp_dir.iterdir()
                if p.name.startswith("session_") and p.name != "session_latest"
            ]
        except OSError:
            return []

    def ours(self) -> list[Path]:
        """The session folders this stack's head made."""
        if self.head_pid is None:
            return []
        suffix = f"_{self.head_pid}"
        return [
            self.temp_dir / name
            for name in self._sessions(self.temp_dir)
            if name not in self.existing and name.endswith(suffix) and not (self.temp_dir / name).is_symlink()
        ]

    def remove(self) -> list[Path]:
        """Remove this head's session folders and what points only at them; returns the folders removed.
        Call once the head has stopped: a running head writes into its session."""
        removed = [path for path in self.ours() if _removed_tree(path)]
        for name in ("session_latest", "prom_metrics_service_discovery.json"):
            link = self.temp_dir / name
            if link.is_symlink() and any(
                (self.temp_dir / os.readlink(link)).is_relative_to(path) for path in removed
            ):
                link.unlink(missing_ok=True)
        current = self.temp_dir / "ray_current_cluster"
        with contextlib.suppress(OSError):
            if removed and current.read_text().strip() == self.gcs_address:
                current.unlink()
        with contextlib.suppress(OSError):
            self.temp_dir.rmdir()  # only once empty: nothing of another stack's goes
        return removed


def _removed_tree(path: Path) -> bool:
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()


def ray_head(
    *,
    data_dir: Path,
    token: str,
    gcs_port: int,
    node_ip: str = "127.0.0.1",
    dashboard_host: str = "127.0.0.1",
    dashboard_port: int,
    dashboard_agent_listen_port: int,
    dashboard_agent_grpc_port: int | None = None,
    node_manager_port: int | None = None,
    object_manager_port: int | None = None,
    metrics_export_port: int | None = None,
    runtime_env_agent_port: int | None = None,
    dashboard_metrics_port: int | None = None,
    client_server_port: int | None = None,
    min_worker_port: int,
    max_worker_port: int,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    temp_dir: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> ManagedProcess:
    """`ray start --head --block`, trimmed (service.stack.ray_start): SIGTERM to it takes the whole local
    cluster down cleanly.

    Ports are explicit because Redis (and other services) often hold Ray's defaults (6379), and because a
    port Ray picks at random may be one another stack on this machine was configured with. `normlab serve`
    gives every one (service.stack.launcher); a port left None here is Ray's pick. With `node_ip` 127.0.0.1
    (the default) every port of the node listens on 127.0.0.1 only.
    """
    argv = [
        # `ray start`, with a dashboard that loads only the modules this stack uses (that module says which).
        sys.executable,
        "-m",
        "service.stack.ray_start",
        "start",
        "--head",
        f"--port={gcs_port}",
        f"--node-ip-address={node_ip}",
        f"--dashboard-host={dashboard_host}",
        f"--dashboard-port={dashboard_port}",
        f"--dashboard-agent-listen-port={dashboard_agent_listen_port}",
        f"--min-worker-port={min_worker_port}",
        f"--max-worker-port={max_worker_port}",
        "--disable-usage-stats",
        # The autoscaler's monitor (~50 MB) scales nothing on a fixed loopback head.
        "--no-monitor",
        "--block",
    ]
    for flag, port in (
        ("--dashboard-agent-grpc-port", dashboard_agent_grpc_port),
        ("--node-manager-port", node_manager_port),
        ("--object-manager-port", object_manager_port),
        ("--metrics-export-port", metrics_export_port),
        ("--runtime-env-agent-port", runtime_env_agent_port),
    ):
        if port is not None:
            argv.append(f"{flag}={port}")
    if client_server_port is not None:  # only then does the head run Ray's client server (ray_start says why)
        argv.append(f"--ray-client-server-port={client_server_port}")
    argv += _resource_args(num_cpus, num_gpus)
    argv.append(f"--temp-dir={temp_dir or default_ray_temp_dir(gcs_port)}")
    env = {**ray_head_env(token, node_ip), **(extra_env or {})}
    if dashboard_metrics_port is not None:  # no `ray start` flag: the dashboard reads it from its environment
        env["DASHBOARD_METRIC_PORT"] = str(dashboard_metrics_port)
    return ManagedProcess(
        name="ray-head",
        argv=argv,
        env=env,
        log_path=data_dir / "logs" / "ray-head.log",
        health_url=f"http://{dashboard_host}:{dashboard_port}/api/version",
        health_headers={"Authorization": f"Bearer {token}"},
        # The dashboard answers before the raylet runs; a head stopped while it still starts is slow to go.
        ready_text="Ray runtime started",
    )


def warm_driver_server(
    *,
    data_dir: Path,
    socket_path: Path,
    token: str,
    node_ip: str,
    driver_env: dict[str, str],
    release_after_s: float = 0.0,
    extra_env: dict[str, str] | None = None,
) -> ManagedProcess:
    """`python -m workers.driver.warm_server`: forks a study's driver for its Ray job (see that module).

    It starts lean and imports the driver's modules (~0.2 GB) when the first study comes, and gives them
    back after `release_after_s` without a study (0: never): an idle stack holds no driver imports.
    Its environment is a job's on the Ray head this stack starts (the head's, plus what drivers are given),
    because modules read some of it as they are imported (Ray reads whether it may leave loopback, for
    one); each driver then takes its job's own. `extra_env`: what the head was given besides (ray_head's)."""
    argv = [sys.executable, "-m", "workers.driver.warm_server", "--socket", str(socket_path), "--lazy"]
    return ManagedProcess(
        name="warm-drivers",
        argv=[*argv, "--release-after", f"{release_after_s:g}"],
        # Ray gives a job with no CPUs one OpenMP thread; BLAS reads it once, at import.
        env={**ray_head_env(token, node_ip), **(extra_env or {}), **driver_env, "OMP_NUM_THREADS": "1"},
        log_path=data_dir / "logs" / "warm-drivers.log",
        ready_text="warm driver server listening",
    )


def ray_worker(
    *,
    data_dir: Path,
    token: str,
    head_address: str,
    node_ip: str,
    min_worker_port: int,
    max_worker_port: int,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    temp_dir: Path | None = None,
    name: str = "ray-worker",
) -> ManagedProcess:
    """`ray start --address=HEAD --block`: one more node (the ray-worker container, without the container)."""
    argv = [
        venv_executable("ray"),
        "start",
        f"--address={head_address}",
        f"--node-ip-address={node_ip}",
        f"--min-worker-port={min_worker_port}",
        f"--max-worker-port={max_worker_port}",
        "--disable-usage-stats",
        "--block",
    ]
    argv += _resource_args(num_cpus, num_gpus)
    if temp_dir is not None:
        argv.append(f"--temp-dir={temp_dir}")
    env = {**_node_env(token), **_prompt_stop_env()}
    # A worker node serves no HTTP: `ray start` says so in its log once the node has joined.
    return ManagedProcess(
        name=name,
        argv=argv,
        env=env,
        log_path=data_dir / "logs" / f"{name}.log",
        ready_text="Ray runtime started",
    )


# --- What outlives a killed launcher: the record of what it started, its guard, the next start ---

_RECORDS_DIR = "run"


def _boot_id() -> str:
    """Start times count from boot: after a reboot no recorded process can still run."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@dataclass
class StackRecord:
    """What one launcher started, as <data dir>/run/serve-<pid>-<random>.json: enough to stop it without
    the launcher."""

    path: Path
    launcher: ProcessIdentity | None
    host: str
    boot: str
    processes: list[dict[str, Any]]  # name, mark, and once started pid and started (ProcessIdentity)
    ray_sessions: dict[str, Any] | None = (
        None  # RaySessions.to_json() of the head started, removed at the stop
    )

    @classmethod
    def for_this_launcher(cls, data_dir: Path) -> StackRecord:
        return cls(
            path=data_dir / _RECORDS_DIR / f"serve-{os.getpid()}-{uuid.uuid4().hex[:8]}.json",
            launcher=ProcessIdentity.of(os.getpid()),
            host=socket.gethostname(),
            boot=_boot_id(),
            processes=[],
        )

    @classmethod
    def read(cls, path: Path) -> StackRecord | None:
        try:
            raw = json.loads(path.read_text())
            launcher = raw["launcher"]
            return cls(
                path=path,
                launcher=None if launcher is None else ProcessIdentity(**launcher),
                host=str(raw["host"]),
                boot=str(raw["boot"]),
                processes=list(raw["processes"]),
                ray_sessions=raw.get("ray_sessions"),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None  # being written, or not ours: only a readable record is acted on

    def track(self, process: ManagedProcess) -> None:
        """Note a child before it starts (its mark finds it even if the launcher dies during the start),
        and again after (its pid and start time)."""
        entry: dict[str, Any] = {"name": process.name, "mark": process.mark}
        if process.identity is not None:
            entry.update(pid=process.identity.pid, started=process.identity.started)
        self.processes = [p for p in self.processes if p["mark"] != process.mark] + [entry]
        self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        launcher = None if self.launcher is None else vars(self.launcher)
        text = json.dumps(
            {
                "launcher": launcher,
                "host": self.host,
                "boot": self.boot,
                "processes": self.processes,
                "ray_sessions": self.ray_sessions,
            }
        )
        partial = self.path.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(self.path)  # a reader sees the old record or the new one, never half of one

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def launcher_running(self) -> bool:
        """Whether the launcher that wrote this record still runs. A record written on another machine
        (a data dir on a shared disk), or where there is no /proc to tell, counts as running."""
        if self.host != socket.gethostname() or self.launcher is None:
            return True
        return self.boot == _boot_id() and self.launcher.is_running()

    def children(self) -> set[ProcessIdentity]:
        """The recorded children (the launcher's own) that still run: same pid, same start time."""
        if self.boot != _boot_id():
            return set()
        recorded = [
            ProcessIdentity(int(process["pid"]), int(process["started"]))
            for process in self.processes
            if "pid" in process
        ]
        return {identity for identity in recorded if identity.is_running()}

    def running(self) -> set[ProcessIdentity]:
        """What the record names that still runs: the recorded children, and every process carrying a
        recorded mark (all they started)."""
        if self.boot != _boot_id():
            return set()
        return self.children() | marked_processes([p["mark"] for p in self.processes])

    def note_ray_sessions(self, sessions: RaySessions) -> None:
        """The head started here makes these session folders: whoever stops the stack removes them."""
        self.ray_sessions = sessions.to_json()
        self._write()

    def stop_everything(self, *, grace_s: float = STOP_GRACE_S) -> int:
        """Stop what the record names (SIGTERM, grace, SIGKILL), remove the Ray session folders its head
        made once nothing runs, and remove the record; returns how many processes ran."""
        children = self.children()
        seen = set(children)

        def find() -> set[ProcessIdentity]:
            running = self.running()
            seen.update(running)
            return running

        left = terminate(find, first=children, grace_s=grace_s)
        if not left and self.ray_sessions is not None and self.host == socket.gethostname():
            with contextlib.suppress(KeyError, TypeError, ValueError):
                RaySessions.from_json(self.ray_sessions).remove()
        self.remove()
        return len(seen)


def stop_stale_stacks(data_dir: Path, *, grace_s: float = STOP_GRACE_S) -> list[str]:
    """Stop what launchers that are gone left running under `data_dir` (their guard died too); one line
    per such launcher, saying what was stopped."""
    stopped = []
    for path in sorted((data_dir / _RECORDS_DIR).glob("serve-*.json")):
        record = StackRecord.read(path)
        if record is None or record.launcher_running():
            continue
        names = ", ".join(p["name"] for p in record.processes) or "nothing"
        count = record.stop_everything(grace_s=grace_s)
        launcher = record.launcher.pid if record.launcher is not None else "?"
        if count:
            stopped.append(f"{count} process(es) of {names}, left by `normlab serve` pid {launcher}")
    return stopped


class StackGuard:
    """The process that stops what a record names once the launcher is gone, however it went.

    It blocks reading a pipe whose only writer is the launcher: the kernel closes it when the launcher
    exits or is killed. Its own session keeps the terminal's SIGINT and SIGHUP away from it.
    """

    def __init__(self, record: StackRecord, log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self._popen: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "service.stack.local_stack", "guard", str(record.path)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def release(self, *, timeout: float = 5.0) -> None:
        """The launcher stopped everything itself: let the guard check the record (gone) and exit."""
        if self._popen is None:
            return
        pipe: IO[bytes] | None = self._popen.stdin
        if pipe is not None:
            pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=timeout)
        self._popen = None


class StartedStack:
    """The children one launcher starts: recorded, guarded from the first start on, stopped together."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.processes: list[ManagedProcess] = []
        self.record: StackRecord | None = None
        self.guard: StackGuard | None = None

    def note_ray_sessions(self, sessions: RaySessions) -> None:
        """The Ray head started here makes these session folders (kept in the record for a guard's stop)."""
        if self.record is not None:
            self.record.note_ray_sessions(sessions)

    def start(self, process: ManagedProcess, *, timeout: float) -> None:
        """Start `process` and wait until it is healthy (ManagedProcess.start)."""
        if self.record is None:
            self.record = StackRecord.for_this_launcher(self.data_dir)
        self.record.track(process)  # its mark, before it starts: found even if we die during the start
        if self.guard is None:
            self.guard = StackGuard(self.record, self.data_dir / "logs" / "stack-guard.log")
        self.processes.append(process)  # stopped on exit even if interrupted mid-start
        try:
            process.start(timeout=timeout)
        finally:
            self.record.track(process)  # and its pid and start time

    def stop(self, *, hurry: threading.Event | None = None) -> set[ProcessIdentity]:
        """Stop every child with what it started (one grace period for all; `hurry` cuts it short), then
        drop the record and let the guard go. Returns what still runs (normally nothing); the record
        then stays, for the guard and the next start."""
        left = stop_all(list(reversed(self.processes)), hurry=hurry) if self.processes else set()
        if self.record is not None and not left:
            self.record.remove()
        if self.guard is not None:
            self.guard.release()
        return left


def _guard(record_path: Path) -> None:
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    sys.stdin.buffer.read()  # returns once the launcher is gone (or released us)
    record = StackRecord.read(record_path)
    if record is None:
        return  # the launcher stopped everything and removed the record
    count = record.stop_everything()
    print(f"the launcher is gone: stopped {count} process(es) of its stack", flush=True)


def _main(argv: Sequence[str]) -> None:
    if len(argv) == 2 and argv[0] == "guard":
        _guard(Path(argv[1]))
    else:
        sys.exit("usage: python -m service.stack.local_stack guard RECORD")


if __name__ == "__main__":
    _main(sys.argv[1:])
