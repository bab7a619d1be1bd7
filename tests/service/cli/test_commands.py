"""The `normlab` CLI against the real app (FastAPI's TestClient stands in for the network)."""

from __future__ import annotations

import sys
import types

import pytest
from rich.console import Console
from typer.testing import CliRunner

import service.cli.client as api_client
import service.cli.commands as cli
from studies.store import session_scope, set_study_status
from tests.factories import QUICK_SPEC_YAML, run_to_the_end

runner = CliRunner()


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "quick.yaml"
    path.write_text(QUICK_SPEC_YAML)
    return path


def _finish(engine, study_id, *, values=None):
    values = values or {"autonorm_s": 0.95, "frozen_ln": 0.9, "dyt": 0.9}
    run_to_the_end(
        engine,
        study_id,
        {method: [base + seed / 100 for seed in (0, 1, 2)] for method, base in values.items()},
    )


def test_submit_prints_the_new_study_id_and_how_to_follow_it(wired, spec_file, client):
    result = runner.invoke(cli.app, ["submit", str(spec_file)])
    assert result.exit_code == 0, result.output
    (study,) = client.get("/studies").json()
    assert study["id"] in result.output and "15 trials planned" in result.output
    assert f"normlab status {study['id']}" in result.output


def test_submit_wait_follows_the_study_to_the_end_and_prints_the_results_table(
    wired, spec_file, client, app_engine, monkeypatch
):
    def sleep(_seconds):  # the "cluster" finishes the study while the CLI waits
        (study,) = client.get("/studies").json()
        if study["status"] == "queued":
            _finish(app_engine, study["id"])

    monkeypatch.setattr(api_client.time, "sleep", sleep)
    result = runner.invoke(cli.app, ["submit", str(spec_file), "--wait", "--poll", "0"])
    assert result.exit_code == 0, result.output
    assert "succeeded" in result.output
    # The API's markdown rendering, laid out for the terminal: heading, caption, one row per method.
    assert "digits: accuracy" in result.output and "reference frozen_ln" in result.output
    for method in ("autonorm_s", "frozen_ln", "dyt"):
        assert method in result.output
    assert "|" not in result.output  # rendered as a table, not printed as markdown source


def test_submit_wait_exits_non_zero_when_the_study_fails(wired, spec_file, client, app_engine, monkeypatch):
    def sleep(_seconds):
        (study,) = client.get("/studies").json()
        with session_scope(app_engine) as session:
            set_study_status(session, study_id=study["id"], status="failed", error="driver died: OOM")

    monkeypatch.setattr(api_client.time, "sleep", sleep)
    result = runner.invoke(cli.app, ["submit", str(spec_file), "--wait", "--poll", "0"])
    assert result.exit_code == 1
    assert "failed" in result.output and "driver died: OOM" in result.output


def test_an_invalid_spec_is_reported_with_field_paths(wired, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(QUICK_SPEC_YAML.replace("dataset: digits", "dataset: imagenet"))
    result = runner.invoke(cli.app, ["submit", str(bad)])
    assert result.exit_code == 1
    assert "the study spec is invalid" in result.output
    assert "dataset: unknown dataset 'imagenet'" in result.output


def test_a_wrong_token_is_reported_with_how_to_fix_it(wired, spec_file, monkeypatch):
    monkeypatch.setenv("NORMLAB_API_TOKEN", "wrong")
    result = runner.invoke(cli.app, ["submit", str(spec_file)])
    assert result.exit_code == 1
    assert "refused the request" in result.output and "NORMLAB_API_TOKEN" in result.output
    assert "wrong" not in result.output.replace("wrong bearer token", "")  # the token itself is not echoed


def test_an_unreachable_api_says_to_start_it(monkeypatch, tmp_path, spec_file):
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("NORMLAB_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("NORMLAB_API_TOKEN", "t")
    monkeypatch.setattr(cli, "err_console", Console(width=200, stderr=True))
    monkeypatch.setattr(api_client, "err_console", Console(width=200, stderr=True))
    result = runner.invoke(cli.app, ["status", "abc"])
    assert result.exit_code == 1
    assert "cannot reach the API at http://127.0.0.1:9" in result.output and "make run" in result.output


def test_submit_without_any_token_says_where_to_get_one(monkeypatch, tmp_path, spec_file):
    monkeypatch.delenv("NORMLAB_API_TOKEN", raising=False)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(cli, "err_console", Console(width=200, stderr=True))
    monkeypatch.setattr(api_client, "err_console", Console(width=200, stderr=True))
    result = runner.invoke(cli.app, ["submit", str(spec_file)])
    assert result.exit_code == 1 and "no API token" in result.output


def test_status_shows_the_progress(wired, client, app_engine, spec_file):
    runner.invoke(cli.app, ["submit", str(spec_file)])
    (study,) = client.get("/studies").json()
    _finish(app_engine, study["id"])
    result = runner.invoke(cli.app, ["status", study["id"]])
    assert result.exit_code == 0
    assert "succeeded" in result.output and "9/15 done" in result.output and "raysubmit_1" in result.output


def test_status_of_an_unknown_study_fails_with_the_api_message(wired):
    result = runner.invoke(cli.app, ["status", "0" * 32])
    assert result.exit_code == 1 and "no study with id" in result.output


def test_results_prints_csv_raw_and_rejects_unknown_formats(wired, client, app_engine, spec_file):
    runner.invoke(cli.app, ["submit", str(spec_file)])
    (study,) = client.get("/studies").json()
    _finish(app_engine, study["id"])
    result = runner.invoke(cli.app, ["results", "digits", "--format", "csv"])
    assert result.exit_code == 0
    assert result.output.splitlines()[0].startswith("method,")
    assert runner.invoke(cli.app, ["results", "digits", "--format", "xlsx"]).exit_code == 1


def test_in_an_80_column_terminal_the_table_keeps_its_decisive_columns_whole(
    wired, client, app_engine, spec_file, monkeypatch
):
    runner.invoke(cli.app, ["submit", str(spec_file)])
    (study,) = client.get("/studies").json()
    _finish(app_engine, study["id"])
    monkeypatch.setattr(api_client, "console", Console(width=80))
    result = runner.invoke(cli.app, ["results", "digits"])
    assert result.exit_code == 0, result.output
    assert "…" not in result.output and max(len(line) for line in result.output.splitlines()) <= 80
    table = client.get("/results/digits").json()
    autonorm = next(row for row in table["rows"] if row["method"] == "autonorm_s")
    line = next(line for line in result.output.splitlines() if "│autonorm_s" in line)
    assert f"{autonorm['mean']:.4g}" in line and f"{autonorm['diff_mean']:+.4g}" in line
    assert autonorm["verdict"].split()[0] in result.output
    assert "normlab results digits --format md" in result.output


def test_results_of_two_different_experiments_pool_only_with_pool(wired, client, app_engine, tmp_path):
    first = tmp_path / "first.yaml"
    first.write_text(QUICK_SPEC_YAML)
    second = tmp_path / "second.yaml"
    second.write_text(QUICK_SPEC_YAML.replace("name: quick", "name: quick-longer") + "split_seed: 1\n")
    ids = []
    for path in (first, second):
        assert runner.invoke(cli.app, ["submit", str(path)]).exit_code == 0
        ids.append(client.get("/studies").json()[0]["id"])
    for study_id in ids:
        _finish(app_engine, study_id)
    both = ",".join(ids)
    refused = runner.invoke(cli.app, ["results", "digits", "--study", both, "--format", "csv"])
    assert refused.exit_code == 1 and "split_seed" in refused.output
    pooled = runner.invoke(cli.app, ["results", "digits", "--study", both, "--format", "csv", "--pool"])
    assert pooled.exit_code == 0, pooled.output


def test_an_unknown_reference_is_reported_as_a_bad_option_naming_the_choices(
    wired, client, app_engine, spec_file
):
    runner.invoke(cli.app, ["submit", str(spec_file)])
    (study,) = client.get("/studies").json()
    _finish(app_engine, study["id"])
    result = runner.invoke(cli.app, ["results", "digits", "--reference", "layer_norm_typo"])
    assert result.exit_code == 1
    assert "the request's options are invalid" in result.output
    assert "the study spec" not in result.output
    assert "query.reference" in result.output and "frozen_ln" in result.output


def test_cancel_cancels_a_queued_study(wired, client, spec_file):
    runner.invoke(cli.app, ["submit", str(spec_file)])
    (study,) = client.get("/studies").json()
    result = runner.invoke(cli.app, ["cancel", study["id"]])
    assert result.exit_code == 0 and "cancelled" in result.output
    assert client.get(f"/studies/{study['id']}").json()["status"] == "cancelled"


def test_studies_lists_what_was_submitted(wired, client, spec_file):
    runner.invoke(cli.app, ["submit", str(spec_file)])
    (study,) = client.get("/studies").json()
    result = runner.invoke(cli.app, ["studies"])
    assert result.exit_code == 0 and study["id"] in result.output


def test_token_prints_the_token_the_server_stored(monkeypatch, tmp_path):
    monkeypatch.delenv("NORMLAB_API_TOKEN", raising=False)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    (tmp_path / "api_token").write_text("stored-by-the-server\n")
    result = runner.invoke(cli.app, ["token"])
    assert result.exit_code == 0 and result.output.strip() == "stored-by-the-server"


def test_token_prints_NORMLAB_API_TOKEN_when_it_is_set(monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLAB_API_TOKEN", "from-the-environment")
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    result = runner.invoke(cli.app, ["token"])
    assert result.exit_code == 0 and result.output.strip() == "from-the-environment"


def test_token_never_creates_a_token_and_says_how_to_get_the_servers(monkeypatch, tmp_path):
    monkeypatch.delenv("NORMLAB_API_TOKEN", raising=False)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "err_console", Console(width=400, stderr=True))
    monkeypatch.setattr(api_client, "err_console", Console(width=400, stderr=True))
    result = runner.invoke(cli.app, ["token"])
    assert result.exit_code == 1
    assert "make run" in result.output and "NORMLAB_API_TOKEN" in result.output
    assert str(tmp_path / "api_token") in result.output
    assert list(tmp_path.iterdir()) == []  # a client-made token would be one no server accepts


def test_token_mlflow_prints_the_mlflow_password_the_server_stored_or_the_environments(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    (tmp_path / "mlflow_password").write_text("stored-mlflow-password\n")
    result = runner.invoke(cli.app, ["token", "--mlflow"])
    assert result.exit_code == 0 and result.output.strip() == "stored-mlflow-password"
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "compose-env-password")
    result = runner.invoke(cli.app, ["token", "--mlflow"])
    assert result.exit_code == 0 and result.output.strip() == "compose-env-password"


def test_token_mlflow_never_creates_a_password_and_says_where_the_server_keeps_it(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "err_console", Console(width=400, stderr=True))
    monkeypatch.setattr(api_client, "err_console", Console(width=400, stderr=True))
    result = runner.invoke(cli.app, ["token", "--mlflow"])
    assert result.exit_code == 1 and str(tmp_path / "mlflow_password") in result.output
    assert list(tmp_path.iterdir()) == []


def test_serve_hands_over_to_the_launcher(monkeypatch, tmp_path):
    calls = []
    fake = types.ModuleType("service.stack.launcher")
    fake.serve = lambda settings, demo=False, api_only=False: calls.append(
        (settings.data_dir, demo, api_only)
    )
    monkeypatch.setitem(sys.modules, "service.stack.launcher", fake)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    result = runner.invoke(cli.app, ["serve", "--demo"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli.app, ["serve", "--api-only"])
    assert result.exit_code == 0, result.output
    assert calls == [(tmp_path, True, False), (tmp_path, False, True)]


def test_token_ray_prints_the_ray_token_the_server_stored_or_says_where_it_would_be(monkeypatch, tmp_path):
    monkeypatch.delenv("NORMLAB_RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "err_console", Console(width=400, stderr=True))
    missing = runner.invoke(cli.app, ["token", "--ray"])
    assert missing.exit_code == 1 and str(tmp_path / "ray_auth_token") in missing.output
    (tmp_path / "ray_auth_token").write_text("stored-ray-token\n")
    result = runner.invoke(cli.app, ["token", "--ray"])
    assert result.exit_code == 0 and result.output.strip() == "stored-ray-token"
