"""A local Ray head's command, as `normlab serve` builds it on the default ports (nothing is started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.stack.local_stack import ray_head
from service.stack.processes import ManagedProcess


def default_head(**overrides: Any) -> ManagedProcess:
    options: dict[str, Any] = {
        "data_dir": Path("/nonexistent"),
        "token": "t",
        "gcs_port": 6390,
        "dashboard_port": 8265,
        "dashboard_agent_listen_port": 52365,
        "min_worker_port": 10002,
        "max_worker_port": 10999,
    }
    return ray_head(**{**options, **overrides})
