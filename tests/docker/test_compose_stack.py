"""`docker compose up` as users start NormLab (CPU override, two Ray workers), end to end: the quick study
through the API's published port, then a second study that loses a worker and sees the API restart."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from mlflow.tracking import MlflowClient

from service.cli.client import ApiClient, submit_spec_text
from service.stack.processes import http_ok, wait_until
from tests.docker.conftest import WORKERS, RunningStack
from tests.docker.docker_stack import docker
from tests.e2e.specs import two_method_grid

# The first test also waits for the image builds (minutes on a clean 2-core machine).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

QUICK = Path(__file__).resolve().parents[2] / "studies" / "examples" / "quick.yaml"
TERMINAL = {"succeeded", "failed", "cancelled"}
METHODS = ("autonorm_s", "frozen_ln", "dyt")
FAILOVER_EPOCHS = 16
# Four trials of FAILOVER_EPOCHS epochs, two at a time (one per worker): long enough to lose a worker in
# the middle of one; max_failures lets Tune restart a trial whose node died.
# Every epoch checkpointed: the test checks that the killed trial resumes right after its last report.
FAILOVER_SPEC = two_method_grid(
    "docker-failover",
    epochs=FAILOVER_EPOCHS,
    checkpoint_every_s=0,
    resources={"cpu": 1, "gpu": 0},
    max_failures=3,
)


def wait_for_study(running: RunningStack, study_id: str, *, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    with ApiClient(running.api_url) as api:
        while True:
            study = api.json("GET", f"/studies/{study_id}")
            if study["status"] in TERMINAL or time.monotonic() > deadline:
                return study
            time.sleep(2)


def tune_records(running: RunningStack, study_id: str) -> dict[str, list[dict[str, Any]]]:
    """Tune's own per-report rows of every trial (trial id -> rows), read from the shared data volume.

    Each row names the host the trial process ran on: the container's hostname."""
    script = (
        "import json, pathlib, sys\n"
        "rows = {}\n"
        "for path in pathlib.Path(sys.argv[1]).rglob('result.json'):\n"
        "    for line in path.read_text().splitlines():\n"
        "        if line.strip():\n"
        "            row = json.loads(line)\n"
        "            rows.setdefault(row['trial_id'], []).append(\n"
        "                {k: row.get(k) for k in ('hostname', 'epoch', 'done', 'training_iteration')})\n"
        "print(json.dumps(rows))\n"
    )
    head = running.stack.containers("ray-head")[0]
    return json.loads(running.stack.exec(head, "python", "-c", script, f"/data/ray_results/{study_id}"))


def worker_hostnames(running: RunningStack) -> dict[str, str]:
    """hostname -> container name, for every ray-worker replica."""
    return {running.stack.hostname(name): name for name in running.stack.containers("ray-worker")}


def ray_jobs_of(running: RunningStack, study_id: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{running.ray_dashboard_url}/api/jobs/",
        headers={"Authorization": f"Bearer {running.ray_token}"},
        timeout=30,
    )
    response.raise_for_status()
    return [job for job in response.json() if (job.get("metadata") or {}).get("normlab_study_id") == study_id]


def submit(running: RunningStack, spec_text: str) -> dict[str, Any]:
    return submit_spec_text(running.api_url, running.api_token, spec_text, content_type="application/yaml")


# ------------------------------------------------------------------------------------ plugin study

PLUGIN_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"


def test_a_plugin_study_runs_on_the_workers_without_an_image_rebuild(compose_stack):
    """The RMSNorm example: its source is sent with the spec and shipped to the workers by Ray, not baked
    into the image (no file of it is in the image: the example folder is not copied)."""
    spec = yaml.safe_load((PLUGIN_EXAMPLES / "rmsnorm_study.yaml").read_text())
    spec["plugins"] = [
        {"path": "rmsnorm.py", "files": {"__init__.py": (PLUGIN_EXAMPLES / "rmsnorm.py").read_text()}}
    ]
    spec["budget"] = {**spec["budget"], "epochs": 2}
    with compose_stack.clock.phase("plugin study"):
        study = submit_spec_text(
            compose_stack.api_url,
            compose_stack.plugin_token,
            json.dumps(spec),
            content_type="application/json",
        )
        final = wait_for_study(compose_stack, study["id"], timeout=900)
    assert final["status"] == "succeeded", (
        f"{final['status']}: {final.get('error')}\n{compose_stack.stack.all_logs()}"
    )
    records = tune_records(compose_stack, study["id"])
    assert {row["hostname"] for rows in records.values() for row in rows} <= set(
        worker_hostnames(compose_stack)
    )
    with ApiClient(compose_stack.api_url) as api:
        results = api.json("GET", f"/results/digits?study={study['id']}")
    assert {row["method"] for row in results["rows"]} == {"rmsnorm", "frozen_ln", "dyt"}


# ------------------------------------------------------------------------------------ quick study


@pytest.fixture(scope="module")
def quick_study(compose_stack: RunningStack) -> dict[str, Any]:
    with compose_stack.clock.phase("quick study"):
        study = submit(compose_stack, QUICK.read_text())
        final = wait_for_study(compose_stack, study["id"], timeout=900)
    assert final["status"] == "succeeded", (
        f"{final['status']}: {final.get('error')}\n{compose_stack.stack.all_logs()}"
    )
    return final


def test_the_quick_study_succeeds_through_the_published_api_port(quick_study):
    assert quick_study["status"] == "succeeded"
    assert quick_study["progress"]["done"] == 15


def test_the_catalog_page_shows_the_verdicts_the_image_ships(compose_stack):
    from service.web.catalog import DEFAULT_REPORTS_DIR, NO_STUDY, NOT_RUN, catalog_verdicts

    recorded = [
        (row.id, v.tier)
        for row in catalog_verdicts(DEFAULT_REPORTS_DIR)
        for v in row.verdicts
        if v.verdict not in (NOT_RUN, NO_STUDY)
    ]
    page = httpx.get(f"{compose_stack.api_url}/catalog", headers={"Accept": "text/html"}, timeout=30)
    assert page.status_code == 200
    claim, tier = recorded[0]
    assert f'href="/catalog/reports/{tier}/{claim}"' in page.text
    report = httpx.get(f"{compose_stack.api_url}/catalog/reports/{tier}/{claim}", timeout=30)
    assert report.status_code == 200


def test_the_quick_study_ran_trials_on_both_workers_and_none_on_the_head(compose_stack, quick_study):
    records = tune_records(compose_stack, quick_study["id"])
    assert len(records) == 15
    hosts = {row["hostname"] for rows in records.values() for row in rows}
    assert hosts == set(worker_hostnames(compose_stack))
    assert len(hosts) == WORKERS


def mlflow_client(running: RunningStack, monkeypatch: pytest.MonkeyPatch) -> MlflowClient:
    """A client signed in as the stack's MLflow admin (.env's MLFLOW_TRACKING_USERNAME / _PASSWORD), the way
    the API and the Ray nodes sign in: MLflow's client reads the credentials from the environment."""
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.setenv(name, running.variables[name])
    return MlflowClient(running.mlflow_url)


def test_mlflow_holds_every_trial_run_and_the_results_artifacts(compose_stack, quick_study, monkeypatch):
    # MLflow's basic auth is on: the published REST API refuses a request without credentials.
    search = f"{compose_stack.mlflow_url}/api/2.0/mlflow/experiments/search?max_results=1"
    assert httpx.get(search, timeout=30).status_code == 401
    login = (
        compose_stack.variables["MLFLOW_TRACKING_USERNAME"],
        compose_stack.variables["MLFLOW_TRACKING_PASSWORD"],
    )
    assert httpx.get(search, auth=login, timeout=30).status_code == 200
    client = mlflow_client(compose_stack, monkeypatch)
    runs = client.search_runs([quick_study["mlflow_experiment_id"]], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("normlab.role") == "parent"]
    children = [r for r in runs if r.data.tags.get("normlab.role") != "parent"]
    assert [p.info.run_id for p in parents] == [quick_study["mlflow_parent_run_id"]]
    assert len(children) == 15
    assert all(run.info.status == "FINISHED" for run in children)
    assert len({run.data.tags["normlab.trial_key"] for run in children}) == 15
    # Artifacts go through the tracking server (--serve-artifacts) into its own volume.
    listed = {artifact.path for artifact in client.list_artifacts(parents[0].info.run_id, "results")}
    assert {"results/results.md", "results/results.json", "results/results.html"} <= listed
    with tempfile.TemporaryDirectory() as target:
        path = client.download_artifacts(parents[0].info.run_id, "results/results.md", target)
        table = Path(path).read_text(encoding="utf-8")
    assert all(method in table for method in METHODS)


def test_the_digits_results_are_complete(compose_stack, quick_study):
    with ApiClient(compose_stack.api_url) as api:
        table = api.json("GET", "/results/digits", params={"study": quick_study["id"]})
        markdown = api.request("GET", "/results/digits", params={"study": quick_study["id"], "format": "md"})
    rows = {row["method"]: row for row in table["rows"]}
    assert set(rows) == set(METHODS)
    assert all(row["n"] == 3 for row in rows.values())
    assert all(row["ci_low"] <= row["mean"] <= row["ci_high"] for row in rows.values())
    assert all(method in markdown.text for method in METHODS)


# ------------------------------------------------------------------ a worker lost, the API restarted


@pytest.fixture(scope="module")
def failover_study(compose_stack: RunningStack, quick_study) -> dict[str, Any]:
    """The second study: one worker is killed in the middle of a trial, then the API is restarted."""
    running = compose_stack
    workers = worker_hostnames(running)
    api_container = running.stack.containers("api")[0]
    api_started = running.stack.state(api_container)["StartedAt"]
    with running.clock.phase("failover study"):
        study = submit(running, yaml.safe_dump(FAILOVER_SPEC))
        victim: dict[str, Any] = {}

        def a_trial_is_midway_on_a_worker() -> bool:
            for trial_id, rows in tune_records(running, study["id"]).items():
                last = rows[-1]
                epoch = last.get("epoch") or 0
                # Checkpointed a few epochs in, far from done: the kill lands in the middle of the trial.
                if last["hostname"] in workers and 2 <= epoch <= FAILOVER_EPOCHS - 8 and not last["done"]:
                    victim.update(hostname=last["hostname"], trial_id=trial_id)
                    return True
            return False

        assert wait_until(a_trial_is_midway_on_a_worker, timeout=600, interval=0.5), (
            f"no trial got midway on a worker:\n{running.stack.all_logs()}"
        )
        victim["container"] = workers[victim["hostname"]]
        docker("kill", victim["container"])
        docker("restart", api_container, timeout=120)
        assert wait_until(lambda: http_ok(f"{running.api_url}/healthz"), timeout=180, interval=1), (
            running.stack.logs(api_container)
        )
        final = wait_for_study(running, study["id"], timeout=900)
    assert final["status"] == "succeeded", (
        f"{final['status']}: {final.get('error')}\n{running.stack.all_logs()}"
    )
    return {
        "study": final,
        "victim": victim,
        "survivors": set(workers) - {victim["hostname"]},
        "api_started_before": api_started,
        "api_state_after": running.stack.state(api_container),
        "victim_state_after": running.stack.state(victim["container"]),
    }


def test_the_killed_worker_is_down_and_the_api_was_restarted(failover_study):
    assert not failover_study["victim_state_after"]["Running"]
    assert failover_study["api_state_after"]["Running"]
    assert failover_study["api_state_after"]["StartedAt"] != failover_study["api_started_before"]


def test_the_interrupted_trial_resumes_from_its_checkpoint_on_the_other_worker(compose_stack, failover_study):
    records = tune_records(compose_stack, failover_study["study"]["id"])
    rows = records[failover_study["victim"]["trial_id"]]
    before = [r for r in rows if r["hostname"] == failover_study["victim"]["hostname"]]
    after = [r for r in rows if r["hostname"] in failover_study["survivors"]]
    assert before and after and rows == before + after  # it moved once, from the killed worker
    # Resumed after the last epoch it reported (and checkpointed) before the kill, not from the start.
    assert after[0]["epoch"] == before[-1]["epoch"] + 1
    assert after[-1]["epoch"] == FAILOVER_EPOCHS


def test_no_trial_is_lost_or_duplicated(compose_stack, failover_study, monkeypatch):
    study = failover_study["study"]
    with ApiClient(compose_stack.api_url) as api:
        trials = api.json("GET", f"/studies/{study['id']}/trials")
    assert len(trials) == 4 and all(t["status"] == "succeeded" for t in trials)
    assert {(t["method"], t["seed"]) for t in trials} == {
        (m, s) for m in ("frozen_ln", "dyt") for s in (0, 1)
    }
    assert len({t["trial_key"] for t in trials}) == 4
    client = mlflow_client(compose_stack, monkeypatch)
    runs = client.search_runs([study["mlflow_experiment_id"]], max_results=100)
    children = [r for r in runs if r.data.tags.get("normlab.role") != "parent"]
    assert sorted(r.data.tags["normlab.trial_key"] for r in children) == sorted(
        t["trial_key"] for t in trials
    )
    assert all(run.info.status == "FINISHED" for run in children)
    for run in children:  # every epoch reached MLflow, the interrupted trial's included
        steps = {m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")}
        assert steps == set(range(FAILOVER_EPOCHS + 1))


def test_the_api_restart_left_the_study_to_its_one_ray_job(compose_stack, failover_study):
    study = failover_study["study"]
    jobs = ray_jobs_of(compose_stack, study["id"])
    assert [job["submission_id"] for job in jobs] == [study["ray_job_id"]]
    # The driver records the study's outcome, then exits: the job ends a moment after the study.
    assert wait_until(
        lambda: ray_jobs_of(compose_stack, study["id"])[0]["status"] == "SUCCEEDED", timeout=120
    )
