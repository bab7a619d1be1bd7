"""API and Ray tokens: taken from settings, else generated once into the data dir (mode 0600).

Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from service.settings import Settings

__all__ = [
    "api_token_source",
    "ensure_api_token",
    "ensure_ray_auth_token",
    "ray_auth_token_source",
    "read_api_token",
    "token_matches",
]


def ensure_api_token(settings: Settings) -> str:
    """The API bearer token: NORMLAB_API_TOKEN if set, else the stored one, generated on first run."""
    if settings.api_token is not None and settings.api_token.get_secret_value():
        return settings.api_token.get_secret_value()
    return _ensure_token_file(settings.api_token_path)


def ensure_ray_auth_token(settings: Settings) -> str:
    """The Ray cluster token: NORMLAB_RAY_AUTH_TOKEN if set, else the stored one, generated on first run."""
    if settings.ray_auth_token is not None and settings.ray_auth_token.get_secret_value():
        return settings.ray_auth_token.get_secret_value()
    return _ensure_token_file(settings.ray_auth_token_path)


def read_api_token(settings: Settings) -> str | None:
    """The API token without creating one (what a client uses); None when neither env nor file has it."""
    if settings.api_token is not None and settings.api_token.get_secret_value():
        return settings.api_token.get_secret_value()
    try:
        return settings.api_token_path.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


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
