"""Before `normlab serve` starts anything: every port it is about to listen on is free, and each is named by
one setting only.

Ray reports a port it cannot bind deep in the log of the one process that needed it, and carries on without
it: a dashboard agent without its HTTP port leaves a head that lists jobs but refuses every submission. So
each port of what is about to start is bound here first, on the address it will listen on; a port another
process holds is one line naming the port, the setting that chose it and, where the process table says,
who holds it. Services found running and attached to are not checked: their ports are theirs.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from service.settings import Settings
from service.stack.probe import StackUnavailableError

__all__ = ["PlannedPort", "PortUnavailableError", "check_ports", "planned_ports", "ray_head_ports"]


class PortUnavailableError(StackUnavailableError):
    """A port the stack is about to listen on is taken, or named by two settings; one line says which."""


@dataclass(frozen=True)
class PlannedPort:
    """A port a process of the stack will listen on, and the setting (as its environment variable) it
    comes from; `count` > 1: the range port .. port + count - 1 (Ray's worker ports)."""

    setting: str
    host: str
    port: int
    count: int = 1

    @property
    def ports(self) -> range:
        return range(self.port, self.port + self.count)

    def describe(self, port: int) -> str:
        if self.count == 1:
            return f"port {port} ({self.setting})"
        return f"port {port} (in {self.setting}, {self.port}-{self.port + self.count - 1})"


def ray_head_ports(settings: Settings) -> list[PlannedPort]:
    """Every port of the local Ray head and its agents, as `ray start` is told them
    (service.stack.launcher)."""
    node, dashboard = settings.ray_host, settings.ray_dashboard_host
    ports = [
        PlannedPort("NORMLAB_RAY_GCS_PORT", node, settings.ray_gcs_port),
        PlannedPort("NORMLAB_RAY_DASHBOARD_PORT", dashboard, settings.ray_dashboard_port),
        PlannedPort(
            "NORMLAB_RAY_DASHBOARD_AGENT_LISTEN_PORT", node, settings.ray_dashboard_agent_listen_port
        ),
        PlannedPort("NORMLAB_RAY_DASHBOARD_AGENT_GRPC_PORT", node, settings.ray_dashboard_agent_grpc_port),
        PlannedPort("NORMLAB_RAY_NODE_MANAGER_PORT", node, settings.ray_node_manager_port),
        PlannedPort("NORMLAB_RAY_OBJECT_MANAGER_PORT", node, settings.ray_object_manager_port),
        PlannedPort("NORMLAB_RAY_METRICS_EXPORT_PORT", node, settings.ray_metrics_export_port),
        PlannedPort("NORMLAB_RAY_RUNTIME_ENV_AGENT_PORT", node, settings.ray_runtime_env_agent_port),
        # Where the node address is loopback, Ray binds it there; else on every address.
        PlannedPort("NORMLAB_RAY_DASHBOARD_METRICS_PORT", node, settings.ray_dashboard_metrics_port),
        PlannedPort(
            "NORMLAB_RAY_MIN_WORKER_PORT..NORMLAB_RAY_MAX_WORKER_PORT",
            node,
            settings.ray_min_worker_port,
            settings.ray_max_worker_port - settings.ray_min_worker_port + 1,
        ),
    ]
    if settings.ray_client_server_port is not None:
        ports.append(PlannedPort("NORMLAB_RAY_CLIENT_SERVER_PORT", node, settings.ray_client_server_port))
    return ports


def planned_ports(settings: Settings, *, mlflow: bool, ray: bool, api: bool) -> list[PlannedPort]:
    """The ports of what is about to start: MLflow's server, the Ray head, the API."""
    ports = []
    if mlflow:
        ports.append(PlannedPort("NORMLAB_MLFLOW_PORT", settings.mlflow_host, settings.mlflow_port))
    if ray:
        ports += ray_head_ports(settings)
    if api:
        ports.append(PlannedPort("NORMLAB_API_PORT", settings.api_host, settings.api_port))
    return ports


def check_ports(planned: Sequence[PlannedPort]) -> None:
    """Raise PortUnavailableError (one line) for the first port two settings share, or another process
    holds."""
    _no_port_named_twice(planned)
    for entry in planned:
        for port in entry.ports:
            problem = _cannot_bind(entry.host, port)
            if problem is not None:
                raise PortUnavailableError(
                    f"{entry.describe(port)} on {entry.host} {problem}: stop what holds it, or set "
                    f"{_setting_to_change(entry)} to a free port (NORMLAB_RAY_PORT_BASE moves all of Ray's)"
                )


def _setting_to_change(entry: PlannedPort) -> str:
    return entry.setting.split("..")[0] if entry.count == 1 else entry.setting.replace("..", " and ")


def _no_port_named_twice(planned: Iterable[PlannedPort]) -> None:
    owner: dict[int, PlannedPort] = {}
    for entry in planned:
        for port in entry.ports:
            other = owner.setdefault(port, entry)
            if other is not entry:
                raise PortUnavailableError(
                    f"{entry.describe(port)} is also {other.describe(port)}: give each its own port"
                )


def _cannot_bind(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on now (None: it can). SO_REUSEADDR as servers set it, so a port
    a stopped stack left in TIME_WAIT counts as free; a listener on it, or on every address, does not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"cannot be resolved ({exc})"
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"is already in use{_holder(port)}"
            if exc.errno == errno.EADDRNOTAVAIL:
                return "is not an address of this machine"
            return f"cannot be bound ({exc.strerror or exc})"
    return None


def _holder(port: int) -> str:
    """`by <name> (pid N)` when the process table tells who listens on the port (psutil, where installed,
    and only for this user's processes), else nothing."""
    with contextlib.suppress(Exception):
        import psutil

        for connection in psutil.net_connections(kind="tcp"):
            if connection.laddr and connection.laddr.port == port and connection.status == psutil.CONN_LISTEN:
                if connection.pid is None:
                    return ""
                return f" by {psutil.Process(connection.pid).name()} (pid {connection.pid})"
    return ""
