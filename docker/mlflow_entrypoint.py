"""Start MLflow's tracking server with its basic-auth app (the mlflow image's entrypoint).

Writes MLflow's auth config (basic_auth.ini) from the environment, then replaces this process with
`mlflow server --app-name basic-auth ARGS` (ARGS: this script's arguments, the compose `command`).

Environment:
    MLFLOW_AUTH_ADMIN_USERNAME / MLFLOW_AUTH_ADMIN_PASSWORD   required; the admin user MLflow creates on
        its first start against an empty auth database (compose sets them from MLFLOW_TRACKING_USERNAME /
        MLFLOW_TRACKING_PASSWORD, the credentials the API and the Ray nodes send). MLflow reads the
        password from the environment itself, so it is never written to the config file.
    MLFLOW_AUTH_DATABASE_URI        where users and permissions live (default: a SQLite file on the
        mlflow-auth volume)
    MLFLOW_AUTH_DEFAULT_PERMISSION  what a signed-in user without a grant may do (default NO_PERMISSIONS);
        a request without credentials is always answered 401, except /health and static files
    MLFLOW_AUTH_CONFIG_PATH         where the config is written (default /tmp/mlflow-auth/basic_auth.ini)
    MLFLOW_FLASK_SERVER_SECRET_KEY  the CSRF key the auth app requires; one is generated per start when
        unset (it only signs the sign-up form, so a new one after a restart costs nothing)

Standard library only: the image has MLflow and this file, and the tests start the same file.
"""

from __future__ import annotations

import configparser
import os
import secrets
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

__all__ = ["AuthConfigError", "auth_server_argv", "main", "write_auth_config"]

DEFAULT_CONFIG_PATH = "/tmp/mlflow-auth/basic_auth.ini"
DEFAULT_DATABASE_URI = "sqlite:////mlflow-auth/basic_auth.db"
DEFAULT_PERMISSION = "NO_PERMISSIONS"
MIN_PASSWORD_LENGTH = 12  # MLflow's own rule for user passwords
_REQUIRED = ("MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD")


class AuthConfigError(ValueError):
    """The environment lacks what the auth app needs; the message names the variable."""


def write_auth_config(env: MutableMapping[str, str]) -> Path:
    """Write the auth config the environment describes; returns its path. Sets MLFLOW_AUTH_CONFIG_PATH and
    (when unset) MLFLOW_FLASK_SERVER_SECRET_KEY in `env`, which the server must be started with."""
    missing = [name for name in _REQUIRED if not env.get(name)]
    if missing:
        raise AuthConfigError(
            f"set {' and '.join(missing)} (the MLflow admin user) to start MLflow with auth"
        )
    if len(env["MLFLOW_AUTH_ADMIN_PASSWORD"]) < MIN_PASSWORD_LENGTH:
        # MLflow refuses to create the admin with a shorter one, after the server has already started.
        raise AuthConfigError(f"the MLflow admin password needs at least {MIN_PASSWORD_LENGTH} characters")
    config = configparser.ConfigParser()
    config["mlflow"] = {
        "default_permission": env.get("MLFLOW_AUTH_DEFAULT_PERMISSION") or DEFAULT_PERMISSION,
        "database_uri": env.get("MLFLOW_AUTH_DATABASE_URI") or DEFAULT_DATABASE_URI,
        "admin_username": env["MLFLOW_AUTH_ADMIN_USERNAME"],
        "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
    }
    path = Path(env.get("MLFLOW_AUTH_CONFIG_PATH") or DEFAULT_CONFIG_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as file:
        config.write(file)
    _ensure_sqlite_dir(config["mlflow"]["database_uri"])
    env["MLFLOW_AUTH_CONFIG_PATH"] = str(path)
    env.setdefault("MLFLOW_FLASK_SERVER_SECRET_KEY", secrets.token_hex(32))
    return path


def _ensure_sqlite_dir(database_uri: str) -> None:
    """SQLite creates the file but not its folder."""
    prefix = "sqlite:///"
    if database_uri.startswith(prefix) and ":memory:" not in database_uri:
        Path(database_uri[len(prefix) :]).parent.mkdir(parents=True, exist_ok=True)


def auth_server_argv(server_args: Sequence[str]) -> list[str]:
    return ["mlflow", "server", "--app-name", "basic-auth", *server_args]


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    env = dict(os.environ if environ is None else environ)
    try:
        write_auth_config(env)
    except AuthConfigError as error:
        sys.exit(f"mlflow: {error}")
    command = auth_server_argv(sys.argv[1:] if argv is None else argv)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
