"""`normlab serve` on a database file that is no database: one line naming the file and what to do, a
non-zero exit, nothing started (before, a traceback of some 280 lines through Alembic and SQLAlchemy)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.e2e.conftest import REPO, serve_environment


def test_serve_on_a_garbage_database_says_so_in_one_line_and_exits(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    database = data_dir / "normlab.db"
    database.write_bytes(os.urandom(64 * 1024))
    env = serve_environment(data_dir, Path("/tmp") / f"nl-corrupt-{uuid.uuid4().hex[:6]}")

    result = subprocess.run(
        [str(Path(sys.executable).parent / "normlab"), "serve"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1, result.stdout + result.stderr
    output = (result.stdout + result.stderr).strip()
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert str(database) in errors[0] and "move it aside" in errors[0] and "backup" in errors[0]
    assert len(output.splitlines()) <= 3, output  # the error, and at most a warning or two before it
    started = {"mlflow.db", "mlartifacts", "ray_results"} & {path.name for path in data_dir.iterdir()}
    assert not started, started  # the database is checked before MLflow or Ray start
