"""The embedded stack `make run` starts on one machine: an MLflow server and a Ray head, on loopback.

The same functions start the stack in the end-to-end tests, so what is tested is what users run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from service.processes import ManagedProcess, venv_executable

__all__ = ["mlflow_server", "ray_auth_env", "ray_head", "ray_worker"]


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


def _resource_args(num_cpus: int | None, num_gpus: int | None) -> list[str]:
    """`ray start` flags for the node's resources; None lets Ray detect them."""
    args = []
    if num_cpus is not None:
        args.append(f"--num-cpus={num_cpus}")
    if num_gpus is not None:
        args.append(f"--num-gpus={num_gpus}")
    return args


def mlflow_server(
    *,
    data_dir: Path,
    host: str,
    port: int,
    backend_store_uri: str | None = None,
    artifacts_dir: Path | None = None,
    workers: int = 1,
) -> ManagedProcess:
    backend = backend_store_uri or f"sqlite:///{data_dir / 'mlflow.db'}"
    artifacts = artifacts_dir or data_dir / "mlartifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = [
        venv_executable("mlflow"),
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
    return ManagedProcess(
        name="mlflow",
        argv=argv,
        log_path=data_dir / "logs" / "mlflow.log",
        health_url=f"http://{host}:{port}/health",
    )


def ray_head(
    *,
    data_dir: Path,
    token: str,
    gcs_port: int,
    node_ip: str = "127.0.0.1",
    dashboard_host: str = "127.0.0.1",
    dashboard_port: int,
    dashboard_agent_listen_port: int,
    client_server_port: int,
    min_worker_port: int,
    max_worker_port: int,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    temp_dir: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> ManagedProcess:
    """`ray start --head --block`: SIGTERM to it takes the whole local cluster down cleanly.

    Ports are explicit because Redis (and other services) often hold Ray's defaults (6379). With
    `node_ip` 127.0.0.1 (the default) every port of the node listens on 127.0.0.1 only.
    """
    argv = [
        venv_executable("ray"),
        "start",
        "--head",
        f"--port={gcs_port}",
        f"--node-ip-address={node_ip}",
        f"--dashboard-host={dashboard_host}",
        f"--dashboard-port={dashboard_port}",
        f"--dashboard-agent-listen-port={dashboard_agent_listen_port}",
        f"--ray-client-server-port={client_server_port}",
        f"--min-worker-port={min_worker_port}",
        f"--max-worker-port={max_worker_port}",
        "--disable-usage-stats",
        "--block",
    ]
    argv += _resource_args(num_cpus, num_gpus)
    # Unix socket paths are limited to ~107 bytes, so Ray's temp dir must stay short.
    argv.append(f"--temp-dir={temp_dir or Path('/tmp') / f'normlab-ray-{gcs_port}'}")
    env = {**_node_env(token), **_loopback_only_env(node_ip), **(extra_env or {})}
    return ManagedProcess(
        name="ray-head",
        argv=argv,
        env=env,
        log_path=data_dir / "logs" / "ray-head.log",
        health_url=f"http://{dashboard_host}:{dashboard_port}/api/version",
        health_headers={"Authorization": f"Bearer {token}"},
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
    env = _node_env(token)
    # A worker node serves no HTTP: `ray start` says so in its log once the node has joined.
    return ManagedProcess(
        name=name,
        argv=argv,
        env=env,
        log_path=data_dir / "logs" / f"{name}.log",
        ready_text="Ray runtime started",
    )
