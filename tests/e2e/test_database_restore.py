"""A study whose database is restored from an older copy while it runs, as a backup restore would: the trials
that ended between the copy and the restore vanish from the store, and the study must not end "succeeded"
without them. Its driver recovers them from Tune's results (or MLflow) before it marks the study
succeeded, so every planned trial is back with its metrics and its MLflow run, and /results states the
study complete.

The copy and the restore go through SQLite's online backup, which is how a live SQLite database is copied
and put back consistently (WAL included) while the stack keeps its connections open."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import RunningService, study_trials

pytestmark = pytest.mark.slow

TERMINAL = {"succeeded", "failed", "cancelled"}
METHODS = ["frozen_ln", "dyt"]
SEEDS = [0, 1, 2, 3, 4]
# Ten final trials (a fixed lr: no tuning phase) of a few short epochs on real digits: long enough to copy
# the database after the first trials ended and restore it after a few more, before the study ends.
SPEC = {
    "name": "restored-mid-study",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "methods": METHODS,
    "search": {"lr": 0.005},
    "seeds": SEEDS,
    "budget": {"epochs": 4, "batch_size": 64},
    "resources": {"cpu": 1, "gpu": 0},
}


def _database(service: RunningService) -> Path:
    return Path(service.database_url.removeprefix("sqlite:///"))


def _copy(source: Path, target: Path) -> None:
    """SQLite's online backup of `source` into `target` (either may be the live database)."""
    with sqlite3.connect(source, timeout=60) as src, sqlite3.connect(target, timeout=60) as dst:
        src.backup(dst, sleep=0.05)
    src.close()
    dst.close()


def _succeeded(service: RunningService, study_id: str) -> set[str]:
    return {t.trial_key for t in study_trials(service, study_id) if t.status == "succeeded"}


def _wait_for(service: RunningService, study_id: str, count: int) -> set[str]:
    """The keys of the succeeded trials once there are at least `count`, while the study still runs."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        done = _succeeded(service, study_id)
        if len(done) >= count:
            return done
        time.sleep(0.2)
    pytest.fail(f"study {study_id} did not reach {count} succeeded trials:\n{service.log_tail()}")


def test_a_database_restored_from_an_older_copy_mid_study_ends_with_every_trial_or_says_which_are_missing(
    running_service, tmp_path
):
    service = running_service
    backup = tmp_path / "normlab-backup.db"
    with service.client() as client:
        created = client.post("/studies", json=SPEC, headers=service.auth())
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]

        in_backup = _wait_for(service, study_id, 1)
        _copy(_database(service), backup)
        in_backup = {key for key in in_backup if key in _succeeded(service, study_id)}
        ended_before_restore = _wait_for(service, study_id, len(in_backup) + 3)
        assert client.get(f"/studies/{study_id}").json()["status"] == "running", "ended before the restore"
        _copy(backup, _database(service))  # the restore: the store goes back to the older copy
        lost = ended_before_restore - _succeeded(service, study_id)
        assert lost, "the restore removed no ended trial: the copy was not older"

        deadline = time.monotonic() + 900
        while (study := client.get(f"/studies/{study_id}").json())["status"] not in TERMINAL:
            assert time.monotonic() < deadline, f"study still {study['status']}:\n{service.log_tail()}"
            time.sleep(1)

        trials = study_trials(service, study_id)
        if study["status"] == "failed":
            # Acceptable only as the issue asks: failed naming the trials that are missing.
            missing = {f"{study_id}/final/{m}/seed{s}" for m in METHODS for s in SEEDS} - {
                t.trial_key for t in trials if t.status in ("succeeded", "failed")
            }
            assert missing and "is incomplete" in study["error"], study["error"]
            assert all(key in study["error"] for key in missing), (missing, study["error"])
            return
        assert study["status"] == "succeeded", f"{study['error']}\n{service.log_tail()}"
        by_key = {t.trial_key: t for t in trials}
        planned = {f"{study_id}/final/{m}/seed{s}" for m in METHODS for s in SEEDS}
        assert planned <= set(by_key), sorted(planned - set(by_key))
        assert all(
            by_key[key].status == "succeeded" and by_key[key].metric_value is not None for key in planned
        )
        # The trials the restore took away are back, from Tune's record, with their MLflow runs.
        assert all(by_key[key].mlflow_run_id for key in lost), [(k, by_key[k].mlflow_run_id) for k in lost]
        progress = study["progress"]
        assert progress["done"] == progress["succeeded"] == progress["planned"] == len(planned)

        results = client.get("/results/digits", params={"study": study_id}).json()
        (shown,) = results["studies"]
        assert (shown["complete"], shown["recorded"], shown["missing"]) == (True, len(planned), [])
        assert sorted(row["n"] for row in results["rows"]) == [len(SEEDS)] * len(METHODS)
