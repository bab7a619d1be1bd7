"""Fixtures shared by the worker tests: the real MLflow tracking server `make run` starts, on a free port."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from service.stack.local_stack import mlflow_server as mlflow_server_process
from service.stack.processes import free_port


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mlflow server` with a SQLite backend on 127.0.0.1:<free port>; yields its tracking URI."""
    port = free_port()
    server = mlflow_server_process(data_dir=tmp_path_factory.mktemp("mlflow"), host="127.0.0.1", port=port)
    server.start(timeout=120)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def ray_cluster(request):
    """A local Ray cluster with token authentication, the token given in the environment.

    Ray >= 2.59 turns token auth on by default for a cluster started by ray.init() and writes a token to
    ~/.ray/auth_token when none exists; setting RAY_AUTH_MODE=token and RAY_AUTH_TOKEN explicitly keeps auth
    on without touching the home directory. Workers inherit the environment, so they authenticate too.
    """
    import ray
    from ray._raylet import AuthenticationTokenLoader, Config

    def refresh_auth_config() -> None:
        # This process read RAY_AUTH_MODE when it first imported ray (earlier tests import it): re-read it,
        # or the driver would talk to the token-protected GCS without a token. ray.init refreshes it itself
        # only when it turns auth on by default (RAY_AUTH_MODE unset).
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()

    names = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(
        {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
        }
    )
    refresh_auth_config()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        object_store_memory=100 * 1024**2,
        log_to_driver=False,
    )
    # Pickle the test module's functions by value: Ray workers cannot import the tests package by name.
    ray.cloudpickle.register_pickle_by_value(request.module)
    try:
        yield
    finally:
        ray.cloudpickle.unregister_pickle_by_value(request.module)
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        refresh_auth_config()
