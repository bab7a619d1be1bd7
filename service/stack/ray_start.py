"""`python -m service.stack.ray_start ARGS`: `ray start ARGS`, trimmed to what a NormLab stack uses.

Three things plain `ray start --head --block` does that an embedded stack pays for at rest and never uses,
none of which `ray start` has an option for; each is one wrapped Ray function, and should a Ray release
change it, that part runs as under plain `ray start`:
- The dashboard runs each of its modules in a process of its own (~20 MB each). `ray start` passes the
  dashboard's own `--modules-to-load` only when the dashboard is switched off (and then without the Jobs
  API the service submits studies through), so the function that starts Ray's processes is wrapped to add
  it. Kept: the Jobs API (JobHead), and what the dashboard's Overview, Cluster, Jobs, Actors and Logs views
  read (NodeHead, StateHead, ReportHead). Left out: Prometheus/Grafana metrics, events, Ray Data, Ray Train
  and Ray Serve, none of which NormLab runs.
- `ray start` runs the Ray client server (~50 MB; what `ray.init("ray://...")` connects through) on port
  10001 whenever its dependencies are installed. Here it runs only when `--ray-client-server-port` is
  given: NormLab's drivers connect to the GCS directly.
- `--block` keeps `ray start`, with all of Ray imported (~130 MB), waiting on the head's processes. Once the
  head runs, this process becomes service.stack.ray_watch (exec: same pid, same children), which waits as
  `--block` does with nothing but the standard library.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["DASHBOARD_MODULES", "main", "watcher_command", "with_modules"]

DASHBOARD_MODULES = ("JobHead", "NodeHead", "StateHead", "ReportHead", "UsageStatsHead")
_OPTION = "--modules-to-load"
_CLIENT_SERVER_OPTION = "--ray-client-server-port"
_WATCHER = Path(__file__).with_name("ray_watch.py")


def with_modules(command: list[str], modules: tuple[str, ...] = DASHBOARD_MODULES) -> list[str]:
    """The dashboard's command line, told which modules to load (unless it already is)."""
    if any(arg.startswith(_OPTION) for arg in command):
        return command
    return [*command, f"{_OPTION}={','.join(modules)}"]


def wants_client_server(argv: list[str]) -> bool:
    return any(arg == _CLIENT_SERVER_OPTION or arg.startswith(f"{_CLIENT_SERVER_OPTION}=") for arg in argv)


def watcher_command(processes: dict[str, list[int]]) -> list[str]:
    """The lean watcher's command line for the head's processes ({Ray process type: pids})."""
    pids = [f"{kind}={pid}" for kind, kind_pids in processes.items() for pid in kind_pids]
    # -I -S: no site-packages, no environment's PYTHON* variables, nothing of the venv imported.
    return [sys.executable, "-I", "-S", str(_WATCHER), *pids]


def _become_watcher(all_processes: dict[str, list[Any]]) -> NoReturn:
    command = watcher_command(
        {kind: [info.process.pid for info in infos] for kind, infos in all_processes.items()}
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


def _load_only_the_modules_used() -> None:
    from ray._private import ray_constants, services

    start_ray_process = services.start_ray_process

    def start(command: list[str], process_type: str, *args: Any, **kwargs: Any) -> Any:
        if process_type == ray_constants.PROCESS_TYPE_DASHBOARD:
            command = with_modules(command)
        return start_ray_process(command, process_type, *args, **kwargs)

    services.start_ray_process = start  # looked up at call time by services.start_api_server


def _no_client_server() -> None:
    from ray.scripts import scripts

    if hasattr(scripts, "get_ray_client_dependency_error"):
        # `ray start` gives the client server port 10001 unless this says its dependencies are missing.
        scripts.get_ray_client_dependency_error = lambda: ImportError("not started by NormLab's head")


def _hand_the_wait_to_the_watcher() -> None:
    from ray._private.node import Node

    check = getattr(Node, "dead_processes", None)
    if check is None:
        return

    def dead_processes(self: Any) -> Any:
        # `--block` calls this once a second from when the head runs; the first call hands over, unless a
        # process has already died (then Ray reports it and stops the rest, as it would).
        dead = check(self)
        if dead:
            return dead
        _become_watcher(self.all_processes)

    Node.dead_processes = dead_processes  # type: ignore[method-assign]


def main() -> None:
    from ray.scripts.scripts import main as ray_main

    argv = sys.argv[1:]
    _load_only_the_modules_used()
    if not wants_client_server(argv):
        _no_client_server()
    if "--block" in argv:
        _hand_the_wait_to_the_watcher()
    sys.argv = ["ray", *argv]
    ray_main()


if __name__ == "__main__":
    main()
