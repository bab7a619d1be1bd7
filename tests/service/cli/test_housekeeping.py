"""`normlab tag`, `normlab delete` and the filters of `normlab studies`, against the real app (FastAPI's
TestClient stands in for the network)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import service.cli.commands as cli
from studies.store import session_scope, set_study_status
from tests.factories import digits_spec, quick_spec, submit

runner = CliRunner()


def _tags(client, study_id: str) -> list[str]:
    return client.get(f"/studies/{study_id}").json()["tags"]


def _ended(client, app_engine, **changes) -> str:
    study_id = submit(client, quick_spec(**changes))
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=study_id, status="cancelled")
    return study_id


# ------------------------------------------------------------------------------------------------- tag


def test_tag_adds_tags_to_those_the_study_has(wired, client):
    study_id = submit(client)
    assert runner.invoke(cli.app, ["tag", study_id, "paper"]).exit_code == 0
    result = runner.invoke(cli.app, ["tag", study_id, "v1", "paper"])
    assert result.exit_code == 0, result.output
    assert _tags(client, study_id) == ["paper", "v1"]
    assert f"study {study_id}: paper, v1" in result.output


def test_tag_remove_removes_only_those_named(wired, client):
    study_id = submit(client)
    runner.invoke(cli.app, ["tag", study_id, "a", "b", "c"])
    result = runner.invoke(cli.app, ["tag", study_id, "b", "never-had", "--remove"])
    assert result.exit_code == 0, result.output
    assert _tags(client, study_id) == ["a", "c"]


def test_tag_without_tags_prints_the_studys_tags_and_needs_no_token(wired, client, monkeypatch):
    study_id = submit(client)
    runner.invoke(cli.app, ["tag", study_id, "paper"])
    monkeypatch.delenv("NORMLAB_API_TOKEN")
    result = runner.invoke(cli.app, ["tag", study_id])
    assert result.exit_code == 0 and f"study {study_id}: paper" in result.output


def test_a_bad_tag_is_named_and_nothing_is_sent(wired, client):
    study_id = submit(client)
    result = runner.invoke(cli.app, ["tag", study_id, "ok", "Paper"])
    assert result.exit_code == 1
    assert "('paper' would do)" in result.output and "nothing was changed" in result.output
    assert _tags(client, study_id) == []


def test_tag_of_an_unknown_study_fails_with_the_api_message(wired):
    result = runner.invoke(cli.app, ["tag", "0" * 32, "paper"])
    assert result.exit_code == 1 and "no study with id" in result.output


# ---------------------------------------------------------------------------------------------- delete


def test_delete_yes_deletes_an_ended_study_without_asking(wired, client, app_engine):
    study_id = _ended(client, app_engine)
    result = runner.invoke(cli.app, ["delete", study_id, "--yes"])
    assert result.exit_code == 0, result.output
    assert f"deleted study {study_id}" in result.output
    assert client.get(f"/studies/{study_id}").status_code == 404


def test_delete_asks_for_the_id_to_be_typed_and_deletes_when_it_is(wired, client, app_engine):
    study_id = _ended(client, app_engine, name="old sweep")
    result = runner.invoke(cli.app, ["delete", study_id], input=f"{study_id}\n")
    assert result.exit_code == 0, result.output
    assert "old sweep" in result.output and "type its id to delete it" in result.output
    assert client.get(f"/studies/{study_id}").status_code == 404


@pytest.mark.parametrize("typed", ["y", "", "0" * 32])
def test_delete_keeps_the_study_when_the_id_typed_is_another(wired, client, app_engine, typed):
    study_id = _ended(client, app_engine)
    result = runner.invoke(cli.app, ["delete", study_id], input=f"{typed}\n")
    assert result.exit_code == 1 and "nothing was deleted" in result.output
    assert client.get(f"/studies/{study_id}").status_code == 200


def test_delete_of_a_running_study_says_to_cancel_it_first(wired, client, app_engine):
    study_id = submit(client)
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=study_id, status="running")
    result = runner.invoke(cli.app, ["delete", study_id, "--yes"])
    assert result.exit_code == 1 and "cancel it first" in result.output and "(409)" in result.output
    assert client.get(f"/studies/{study_id}").json()["status"] == "running"


def test_delete_without_a_token_says_where_to_get_one(wired, client, app_engine, monkeypatch, tmp_path):
    study_id = _ended(client, app_engine)
    monkeypatch.delenv("NORMLAB_API_TOKEN")
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path / "elsewhere"))
    result = runner.invoke(cli.app, ["delete", study_id, "--yes"])
    assert result.exit_code == 1 and "no API token" in result.output
    assert client.get(f"/studies/{study_id}").status_code == 200


# --------------------------------------------------------------------------------------------- studies


def test_studies_filters_by_tag_method_query_dataset_and_status(wired, client, app_engine):
    alpha = submit(client, quick_spec(name="alpha sweep"))
    beta = submit(client, digits_spec(name="beta", methods=["frozen_ln"], dataset="mnist_5k"))
    runner.invoke(cli.app, ["tag", alpha, "paper"])
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=beta, status="cancelled")

    def listed(*options: str) -> set[str]:
        result = runner.invoke(cli.app, ["studies", *options])
        assert result.exit_code == 0, result.output
        return {name for name, study_id in (("alpha", alpha), ("beta", beta)) if study_id in result.output}

    assert listed() == {"alpha", "beta"}
    assert listed("--tag", "paper") == {"alpha"}
    assert listed("--method", "dyt") == {"alpha"}
    assert listed("-q", "BETA") == {"beta"}
    assert listed("--query", "sweep", "--tag", "paper") == {"alpha"}
    assert listed("--dataset", "mnist_5k") == {"beta"}
    assert listed("--status", "cancelled", "--tag", "paper") == set()
    assert "paper" in runner.invoke(cli.app, ["studies", "--tag", "paper"]).output  # the tags column


def test_studies_with_an_unknown_method_names_the_choices(wired):
    result = runner.invoke(cli.app, ["studies", "--method", "layernorm"])
    assert result.exit_code == 1 and "unknown method 'layernorm'" in result.output
