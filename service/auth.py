"""API and Ray tokens and the local MLflow's password: taken from settings, else generated once into the
data dir (mode 0600).

Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from service.settings import Settings

if TYPE_CHECKING:
    from pydantic import SecretStr

__all__ = [
    "MlflowCredentials",
    "api_token_source",
    "ensure_api_token",
    "ensure_mlflow_credentials",
    "ensure_plugin_token",
    "ensure_ray_auth_token",
    "mlflow_password_source",
    "ray_auth_token_source",
    "read_api_token",
    "read_mlflow_password",
    "read_plugin_token",
    "token_matches",
]


@dataclass(frozen=True)
class MlflowCredentials:
    """The user and password the local MLflow's basic-auth app knows as its admin."""

    username: str
    password: str = field(repr=False)

    def env(self) -> dict[str, str]:
        """The variables MLflow's client signs in with: what the API, drivers and trials run with."""
        return {"MLFLOW_TRACKING_USERNAME": self.username, "MLFLOW_TRACKING_PASSWORD": self.password}


def ensure_api_token(settings: Settings) -> str:
    """The API bearer token: NORMLAB_API_TOKEN if set, else the stored one, generated on first run."""
    if settings.api_token is not None and settings.api_token.get_secret_value():
        return settings.api_token.get_secret_value()
    return _ensure_token_file(settings.api_token_path)


def ensure_plugin_token(settings: Settings) -> str:
    """The plugin token (the right to submit code): NORMLAB_PLUGIN_TOKEN if set, else the stored one."""
    if settings.plugin_token is not None and settings.plugin_token.get_secret_value():
        return settings.plugin_token.get_secret_value()
    return _ensure_token_file(settings.plugin_token_path)


def read_plugin_token(settings: Settings) -> str | None:
    """The plugin token without creating one (what `normlab token --plugin` prints and submit sends)."""
    return _read_secret(settings.plugin_token, settings.plugin_token_path)


def ensure_ray_auth_token(settings: Settings) -> str:
    """The Ray cluster token: NORMLAB_RAY_AUTH_TOKEN if set, else the stored one, generated on first run."""
    if settings.ray_auth_token is not None and settings.ray_auth_token.get_secret_value():
        return settings.ray_auth_token.get_secret_value()
    return _ensure_token_file(settings.ray_auth_token_path)


def ensure_mlflow_credentials(settings: Settings) -> MlflowCredentials:
    """The local MLflow's admin: MLFLOW_TRACKING_USERNAME (default `normlab`) with MLFLOW_TRACKING_PASSWORD
    if set, else the stored password, generated on first run."""
    if settings.mlflow_password is not None and settings.mlflow_password.get_secret_value():
        password = settings.mlflow_password.get_secret_value()
    else:
        password = _ensure_token_file(settings.mlflow_password_path)
    return MlflowCredentials(settings.mlflow_username, password)


def read_mlflow_password(settings: Settings) -> str | None:
    """The MLflow password without creating one (what `normlab token --mlflow` prints)."""
    return _read_secret(settings.mlflow_password, settings.mlflow_password_path)


def read_ray_auth_token(settings: Settings) -> str | None:
    """The Ray cluster token without creating one (what `normlab token --ray` prints for the dashboard)."""
    return _read_secret(settings.ray_auth_token, settings.ray_auth_token_path)


def _read_secret(configured: SecretStr | None, path: Path) -> str | None:
    """The configured secret if set, else the stored one; None when neither exists (never created here)."""
    if configured is not None and configured.get_secret_value():
        return configured.get_secret_value()
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def mlflow_password_source(settings: Settings) -> str:
    """Where the MLflow password comes from, for messages that must name it without showing it."""
    if settings.mlflow_password is not None and settings.mlflow_password.get_secret_value():
        return "MLFLOW_TRACKING_PASSWORD (environment or .env)"
    return str(settings.mlflow_password_path)


def read_api_token(settings: Settings) -> str | None:
    """The API token without creating one (what a client uses); None when neither env nor file has it."""
    return _read_secret(settings.api_token, settings.api_token_path)


def api_token_source(settings: Settings) -> str:
    """Where the API token comes from, for messages that must name it without showing it."""
    if settings.api_token is not None and settings.api_token.get_secret_value():
        return "NORMLAB_API_TOKEN (environment or .env)"
    return str(settings.api_token_path)


def ray_auth_token_source(settings: Settings) -> str:
    """Where the Ray cluster token comes from, for messages that must name it without showing it."""
    if settings.ray_auth_token is not None and settings.ray_auth_token.get_secret_value():
        return "NORMLAB_RAY_AUTH_TOKEN (environment or .env)"
    return str(settings.ray_auth_token_path)


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so response timing does not reveal how much of a guess was right."""
    if not given:
        return False
    return secrets.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def _ensure_token_file(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        existing = path.read_text(encoding="utf-8").strip()
        if existing:
            return existing
        path.unlink()  # an empty file (an interrupted first run) is replaced
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    try:
        # O_EXCL: when two processes start together exactly one writes; the other reads the winner's token.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token
