"""Fixtures shared by the worker tests: the real MLflow tracking server `make run` starts, on a free port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.local_stack import mlflow_server as mlflow_server_process
from service.processes import free_port


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
