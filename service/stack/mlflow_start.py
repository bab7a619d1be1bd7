"""`python -m service.stack.mlflow_start ARGS`: `mlflow ARGS`, whose server becomes its uvicorn.

`mlflow server` checks and migrates its stores, then starts uvicorn as a child and stays beside it, with all
of MLflow imported (~200 MB PSS), only to pass signals on and to run job execution, which the embedded stack
switches off. Here, with job execution off, it replaces itself with that uvicorn instead (exec: same pid,
the command line and environment MLflow built), so the stack holds one MLflow process, and stopping it
stops the server as before. It wraps the one function MLflow starts the server with; should a MLflow
release change it, or job execution be on, the server runs as under plain `mlflow server`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["main"]


def _become(command: Sequence[str], extra_env: dict[str, str] | None) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], list(command), {**os.environ, **(extra_env or {})})


def _serve_in_this_process() -> None:
    import mlflow.server as server
    from mlflow.environment_variables import MLFLOW_SERVER_ENABLE_JOB_EXECUTION

    spawn = getattr(server, "_exec_cmd", None)
    if spawn is None or MLFLOW_SERVER_ENABLE_JOB_EXECUTION.get():
        return  # the job runner needs the server's parent beside it

    def exec_cmd(command: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        # The server is started once, in the background: (command, extra_env=, capture_output=False,
        # synchronous=False). Anything else MLflow runs this way runs as it would.
        options = dict(kwargs)
        extra_env = options.pop("extra_env", None)
        if args or options != {"capture_output": False, "synchronous": False}:
            return spawn(command, *args, **kwargs)
        _become(command, extra_env)

    server._exec_cmd = exec_cmd  # type: ignore[assignment]


def main() -> None:
    from mlflow.cli import cli

    _serve_in_this_process()
    sys.argv = ["mlflow", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
