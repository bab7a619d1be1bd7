"""Whether a service `normlab serve` needs already answers at its configured address: MLflow's tracking
server (GET /health) and a Ray head's job server (GET /api/version, which token authentication guards)."""

from __future__ import annotations

from enum import Enum
from urllib.parse import urlparse

from service.processes import http_status

__all__ = ["Answer", "StackUnavailableError", "is_http_url", "mlflow_answer", "ray_answer"]

_PROBE_TIMEOUT_S = 2.0


class StackUnavailableError(RuntimeError):
    """MLflow or Ray cannot be used as configured; the message says what to change."""


class Answer(str, Enum):
    UP = "up"  # the service answers (and, for Ray, accepts the token)
    REFUSED = "refused"  # a Ray head answers but refuses the token
    FOREIGN = "foreign"  # something answers HTTP there, but not as the expected service
    DOWN = "down"  # nothing answers


def is_http_url(url: str) -> bool:
    return urlparse(url).scheme in ("http", "https")


def mlflow_answer(tracking_uri: str) -> Answer:
    status = http_status(f"{tracking_uri.rstrip('/')}/health", timeout=_PROBE_TIMEOUT_S)
    if status is None:
        return Answer.DOWN
    return Answer.UP if status == 200 else Answer.FOREIGN


def ray_answer(dashboard_url: str, token: str) -> Answer:
    status = http_status(
        f"{dashboard_url.rstrip('/')}/api/version",
        timeout=_PROBE_TIMEOUT_S,
        headers={"Authorization": f"Bearer {token}"},
    )
    if status is None:
        return Answer.DOWN
    if status == 200:
        return Answer.UP
    return Answer.REFUSED if status in (401, 403) else Answer.FOREIGN
