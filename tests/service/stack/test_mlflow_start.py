"""`mlflow server` run through service.stack.mlflow_start becomes its uvicorn (exec) instead of waiting
beside it, unless job execution needs the parent; everything else MLflow runs is left as it is.
(tests/service/stack/test_local_stack.py runs the real server this way.)"""

from __future__ import annotations

from typing import Any

import mlflow.server
import pytest

from service.stack import mlflow_start


class Became(Exception):
    pass


@pytest.fixture
def spawned(monkeypatch) -> list[tuple[Any, ...]]:
    """MLflow's own starter, recording its calls; os.execve recording and stopping the test."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        mlflow.server, "_exec_cmd", lambda *args, **kwargs: calls.append(("spawn", args, kwargs))
    )

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append(("exec", path, argv, env))
        raise Became

    monkeypatch.setattr(mlflow_start.os, "execve", execve)
    return calls


def test_with_job_execution_off_the_server_replaces_the_mlflow_process(spawned, monkeypatch):
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    mlflow_start._serve_in_this_process()
    command = ["/venv/bin/python", "-m", "uvicorn", "mlflow.server.fastapi_app:app"]
    with pytest.raises(Became):
        mlflow.server._exec_cmd(
            command, extra_env={"_MLFLOW_SGI_NAME": "uvicorn"}, capture_output=False, synchronous=False
        )
    ((kind, path, argv, env),) = spawned
    assert (kind, path, argv) == ("exec", "/venv/bin/python", command)
    assert env["_MLFLOW_SGI_NAME"] == "uvicorn" and env["PATH"]  # MLflow's variables on top of ours


def test_other_commands_mlflow_runs_are_run_as_mlflow_would(spawned, monkeypatch):
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    mlflow_start._serve_in_this_process()
    mlflow.server._exec_cmd(["true"], capture_output=True, synchronous=True)
    assert spawned == [("spawn", (["true"],), {"capture_output": True, "synchronous": True})]


def test_with_job_execution_on_the_server_keeps_its_parent(spawned, monkeypatch):
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "true")
    mlflow_start._serve_in_this_process()
    mlflow.server._exec_cmd(["uvicorn"], extra_env={}, capture_output=False, synchronous=False)
    assert spawned[0][0] == "spawn"
