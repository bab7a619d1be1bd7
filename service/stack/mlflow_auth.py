"""Sign-in for the MLflow server `normlab serve` starts: MLflow's basic-auth app, as compose runs it.

Without it the local MLflow takes writes from every process on the machine: any local user could read or
change every study's runs. With it every request but /health (and the UI's static files) needs the admin's
user and password (service.auth.ensure_mlflow_credentials: generated into the data dir, 0600). The stack
hands them to everything that talks to MLflow: the API's process, the Ray head it starts (whose study drivers
and trials inherit its environment) and the warm driver server. A browser asks for them once per session.

The app's config (the same keys docker/mlflow_entrypoint.py writes for compose) lies in the data dir beside
its user database; the password is not in it: MLflow reads it from MLFLOW_AUTH_ADMIN_PASSWORD when it
creates the admin, on the first start against an empty user database.

What it costs, measured against the open server on a 2-core machine (three alternating rounds each): the
idle stack 899 -> 905 MB PSS (MLflow 194 -> 201 MB, still one process), `normlab serve` up in 12-13 s ->
13-15 s (MLflow alone 5-9 s either way). A request checks the password with a PBKDF2 hash, 155-182 ms where
the open server answered a metrics batch in 5-16 ms, so the app's own cache of successful checks is
switched on (AUTH_CACHE_TTL_S): 6-19 ms.
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import secrets
from pathlib import Path

from service.auth import MlflowCredentials
from service.stack.probe import StackUnavailableError, mlflow_auth_headers
from service.stack.processes import http_status

__all__ = [
    "AUTH_CACHE_TTL_S",
    "MIN_PASSWORD_LENGTH",
    "auth_config_path",
    "auth_server_env",
    "check_sign_in",
]

MIN_PASSWORD_LENGTH = 12  # MLflow's rule: it refuses to create the admin with a shorter password
# Seconds the app trusts a user and password it has checked. The stack's one uvicorn worker is also the one
# that handles a password change through MLflow's API, which drops the cached entry at once, so the
# staleness MLflow warns of (other workers, out-of-band changes) does not arise here.
AUTH_CACHE_TTL_S = 3600
# A request only a signed-in user may make, which answers 200 to the admin: whether the server checks
# credentials, and whether it takes ours.
_SIGNED_IN_PATH = "/api/2.0/mlflow/experiments/search?max_results=1"
# The password hash can take seconds on a loaded machine (the first check, before the cache holds it).
_CHECK_TIMEOUT_S = 30.0


def auth_config_path(data_dir: Path) -> Path:
    return data_dir / "mlflow_auth.ini"


def auth_server_env(credentials: MlflowCredentials, data_dir: Path) -> dict[str, str]:
    """Write the basic-auth app's config into the data dir (0600) and return what the MLflow server must run
    with besides `--app-name basic-auth`. Raises StackUnavailableError, naming the fix, when the app cannot
    start: MLflow's auth extra missing, or a password MLflow would refuse."""
    if importlib.util.find_spec("flask_wtf") is None:
        raise StackUnavailableError(
            "MLflow's sign-in (its basic-auth app) needs mlflow[auth]: run `pip install 'mlflow[auth]'` (or "
            "`make install`), or set NORMLAB_MLFLOW_AUTH=false to start MLflow open to every local process"
        )
    if len(credentials.password) < MIN_PASSWORD_LENGTH:
        raise StackUnavailableError(
            f"MLFLOW_TRACKING_PASSWORD has {len(credentials.password)} characters; MLflow needs at least "
            f"{MIN_PASSWORD_LENGTH}: set a longer one, or unset it to use the one generated into the data dir"
        )
    config = configparser.ConfigParser()
    config["mlflow"] = {
        # A signed-in user other than the admin gets nothing unless granted; the stack signs in as the admin.
        "default_permission": "NO_PERMISSIONS",
        "database_uri": f"sqlite:///{data_dir / 'mlflow_auth.db'}",
        "admin_username": credentials.username,
        "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
        "auth_cache_ttl_seconds": str(AUTH_CACHE_TTL_S),
    }
    path = auth_config_path(data_dir)
    # 0600 whatever the umask: the file names the admin and where the user database lies.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        config.write(file)
    return {
        "MLFLOW_AUTH_CONFIG_PATH": str(path),
        "MLFLOW_AUTH_ADMIN_PASSWORD": credentials.password,
        # The app refuses to start without a key for its forms' CSRF tokens; a new one per start costs
        # nothing (it signs only the sign-up form).
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(32),
    }


def check_sign_in(tracking_uri: str, credentials: MlflowCredentials, source: str) -> bool:
    """Whether the MLflow server at `tracking_uri` asks for credentials (False: it answers anyone). Raises
    StackUnavailableError when it refuses these: drivers and trials would log nothing. `source`: where the
    password comes from, which the message names instead of the password."""
    url = f"{tracking_uri.rstrip('/')}{_SIGNED_IN_PATH}"
    signed_in = http_status(url, timeout=_CHECK_TIMEOUT_S, headers=mlflow_auth_headers(credentials.env()))
    if signed_in in (401, 403):
        raise StackUnavailableError(
            f"the MLflow server at {tracking_uri} refuses user {credentials.username!r} with the password from "
            f"{source}: its user database holds another user or password. Set MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD to its admin's; for the server `normlab serve` starts, stop the stack "
            "and remove mlflow_auth.db from the data dir, and the next start creates the admin anew"
        )
    return http_status(url, timeout=_CHECK_TIMEOUT_S) in (401, 403)
