"""Whether a service `normlab serve` needs already answers at its configured address: MLflow's tracking
server (GET /health) and a Ray head's job server (GET /api/version, which token authentication guards)."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from enum import Enum
from urllib.parse import urlparse

from service.stack.processes import http_status

__all__ = [
    "Answer",
    "StackUnavailableError",
    "is_http_url",
    "mlflow_answer",
    "mlflow_auth_headers",
    "ray_answer",
]

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


def mlflow_auth_headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Authorization header MLflow's own client sends, from the same variables: basic auth with
    MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD, else a bearer MLFLOW_TRACKING_TOKEN; none when unset."""
    env = os.environ if environ is None else environ
    username, password = env.get("MLFLOW_TRACKING_USERNAME"), env.get("MLFLOW_TRACKING_PASSWORD")
    if username and password:
        pair = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {pair}"}
    if token := env.get("MLFLOW_TRACKING_TOKEN"):
        return {"Authorization": f"Bearer {token}"}
    return {}


def mlflow_answer(tracking_uri: str) -> Answer:
    # MLflow's basic-auth app leaves /health open; the credentials go along for a proxy that guards it too.
    status = http_status(
        f"{tracking_uri.rstrip('/')}/health", timeout=_PROBE_TIMEOUT_S, headers=mlflow_auth_headers()
    )
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
