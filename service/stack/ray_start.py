"""`python -m service.stack.ray_start ARGS`: `ray start ARGS`, with a Ray dashboard that loads only the modules
a NormLab stack uses.

The dashboard runs each of its modules in a process of its own (~20 MB each). `ray start` has no option to
choose them (only the dashboard's own `--modules-to-load`, which `ray start` sets just when the dashboard is
switched off, and then without the Jobs API the service submits studies through), so this wraps the one
function that starts Ray's processes and adds that option to the dashboard's command line. Kept: the Jobs
API (JobHead), and what the dashboard's Overview, Cluster, Jobs, Actors and Logs views read (NodeHead,
StateHead, ReportHead). Left out: Prometheus/Grafana metrics, events, Ray Data, Ray Train and Ray Serve,
none of which NormLab runs. Should a Ray release change the wrapped function, the dashboard loads every
module, as under plain `ray start`.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["DASHBOARD_MODULES", "main"]

DASHBOARD_MODULES = ("JobHead", "NodeHead", "StateHead", "ReportHead", "UsageStatsHead")
_OPTION = "--modules-to-load"


def with_modules(command: list[str], modules: tuple[str, ...] = DASHBOARD_MODULES) -> list[str]:
    """The dashboard's command line, told which modules to load (unless it already is)."""
    if any(arg.startswith(_OPTION) for arg in command):
        return command
    return [*command, f"{_OPTION}={','.join(modules)}"]


def main() -> None:
    from ray._private import ray_constants, services
    from ray.scripts.scripts import main as ray_main

    start_ray_process = services.start_ray_process

    def start(command: list[str], process_type: str, *args: Any, **kwargs: Any) -> Any:
        if process_type == ray_constants.PROCESS_TYPE_DASHBOARD:
            command = with_modules(command)
        return start_ray_process(command, process_type, *args, **kwargs)

    services.start_ray_process = start  # looked up at call time by services.start_api_server
    sys.argv = ["ray", *sys.argv[1:]]
    ray_main()


if __name__ == "__main__":
    main()
