"""`normlab status` without a study: whether the service could run one now (GET /readyz as a table, exit 1
when a part is not ready); with a study Ray does not take, why it waits."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from typer.testing import CliRunner

import service.cli.commands as cli
from service.orchestration.readiness import Check
from studies.store import record_submit_failure, session_scope
from tests.factories import submit
from tests.service.web.store_rows import SPEC

runner = CliRunner()


class _TakesJobs:
    def probe(self) -> str:
        return "the Ray job server at http://ray.test takes jobs (its job agent answered)"


def test_a_service_that_cannot_run_a_study_says_which_part_and_exits_1(wired):
    # The service tests' MLflow and Ray addresses (port 9) answer nothing.
    result = runner.invoke(cli.app, ["status"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert any(line.split()[:2] == ["database", "ready"] for line in lines), result.output
    assert any(line.split()[:3] == ["mlflow", "NOT", "READY"] for line in lines), result.output
    assert any(line.split()[:3] == ["ray", "NOT", "READY"] for line in lines), result.output
    assert "not ready: studies queue until each part above is ready" in result.output


def test_a_ready_service_says_so(wired, monkeypatch):
    monkeypatch.setattr("service.orchestration.readiness.check_mlflow", lambda uri: Check(True, "answers"))
    wired.state.dispatcher = _TakesJobs()
    result = runner.invoke(cli.app, ["status"])
    assert result.exit_code == 0, result.output
    assert "ready: a study can run now" in result.output


def test_a_study_ray_does_not_take_says_why_it_waits(wired, client, app_engine):
    study_id = submit(client, SPEC)
    with session_scope(app_engine) as session:
        retry_at = datetime.now(timezone.utc) + timedelta(seconds=30)
        record_submit_failure(session, study_id=study_id, attempt=1, error="no agent", retry_at=retry_at)
    result = runner.invoke(cli.app, ["status", study_id])
    assert result.exit_code == 0
    assert "Ray did not take its driver (1 failed): no agent; next try" in result.output
