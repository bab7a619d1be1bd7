"""End to end: a study whose every trial raises, on the real stack. Each trial's row and the study page
hold the exception (type, message, the last lines of its trace), the trial's MLflow run carries it as its
`normlab.error` tag, and the study fails with one line that says every trial failed and why.

The fault is a damaged dataset cache (the .npz a trial loads first is not an archive): a spec that
validates, failing in the trial as a real fault would. mnist_5k, which no other end-to-end test trains, so
no warm trial process holds it already; the file is removed afterwards.
"""

from __future__ import annotations

import html
import time

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.conftest import study_trials

pytestmark = pytest.mark.slow

SPEC = {
    "name": "every-trial-fails",
    "dataset": "mnist_5k",
    "kind": "grid",
    "model": "vit_lite_tiny",
    "methods": ["dyt", "frozen_ln"],
    "search": {"lr": 0.005},
    "seeds": [0],
    "budget": {"epochs": 1, "batch_size": 64},
    "max_failures": 0,  # no retry: the fault is in the data, not the process
    "resources": {"cpu": 1, "gpu": 0},
}
GARBAGE = b"not an npz archive\n"


def _headline_of_loading(path) -> str:
    """What numpy says, in this environment, about loading GARBAGE as the trials do."""
    try:
        np.load(path, allow_pickle=False)
    except ValueError as exc:
        return f"ValueError: {str(exc).splitlines()[0]}"
    raise AssertionError("numpy loaded garbage")


def test_a_study_whose_every_trial_raises_says_why_in_its_rows_page_runs_and_error(running_service):
    cache = running_service.data_dir / "datasets" / "mnist_5k.npz"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(GARBAGE)
    headline_expected = _headline_of_loading(cache)
    try:
        with running_service.client() as client:
            response = client.post("/studies", json=SPEC, headers=running_service.auth())
            assert response.status_code == 201, response.text
            study_id = response.json()["id"]
            deadline = time.monotonic() + 600
            while (study := client.get(f"/studies/{study_id}").json())["status"] not in {
                "succeeded",
                "failed",
            }:
                assert time.monotonic() < deadline, running_service.log_tail()
                time.sleep(2)
            page = html.unescape(client.get(f"/studies/{study_id}", headers={"Accept": "text/html"}).text)
    finally:
        cache.unlink(missing_ok=True)

    assert study["status"] == "failed", running_service.log_tail()
    first_line = study["error"].splitlines()[0]
    assert first_line.startswith(f"every trial failed (2); first error: {headline_expected} (trial grid/")

    trials = study_trials(running_service, study_id)
    assert [t.status for t in trials] == ["failed", "failed"]
    for trial in trials:
        headline, trace = trial.error.split("\n", 1)
        assert headline == headline_expected
        assert "_load_npz" in trace  # the frames nearest the cause
        assert headline in page
        if trial.mlflow_run_id is not None:  # the run exists once the trial's tracker created it
            tags = MlflowClient(running_service.mlflow_url).get_run(trial.mlflow_run_id).data.tags
            assert tags["normlab.error"] == trial.error
    assert any(t.mlflow_run_id for t in trials), "no trial's MLflow run was found"
