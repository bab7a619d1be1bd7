"""A user's RMSNorm plugin against frozen_ln and dyt on the real stack: the plugin's source travels with
the study to the Ray job and every trial (no image or install step), its knob is tuned like a built-in's,
its method has its rows in /results, and the parent MLflow run keeps the source it ran."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.e2e.test_grid_and_asha_studies import TERMINAL, _trials

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"


def _spec() -> dict:
    spec = yaml.safe_load((EXAMPLES / "rmsnorm_study.yaml").read_text())
    # As `normlab submit` sends it: the plugin's files inline, read beside the spec file.
    spec["plugins"] = [
        {"path": "rmsnorm.py", "files": {"__init__.py": (EXAMPLES / "rmsnorm.py").read_text()}}
    ]
    spec["budget"] = {**spec["budget"], "epochs": 2}
    return spec


def _run_to_end(service, spec: dict) -> dict:
    """Submit with the plugin token and wait for the study to end."""
    with service.client() as client:
        created = client.post("/studies", json=spec, headers=service.plugin_auth())
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        deadline = time.monotonic() + 900
        while (study := client.get(f"/studies/{study_id}").json())["status"] not in TERMINAL:
            if time.monotonic() > deadline:
                pytest.fail(f"study {spec['name']} did not finish:\n{service.log_tail()}")
            time.sleep(2)
    assert study["status"] == "succeeded", study.get("error")
    return study


def test_a_plugin_method_trains_beside_the_built_ins_and_has_its_results_rows(running_service):
    spec = _spec()
    with running_service.client() as client:
        refused = client.post("/studies", json=spec, headers=running_service.auth())
    assert refused.status_code == 403, refused.text  # the API token does not grant running code
    study = _run_to_end(running_service, spec)
    study_id = study["id"]
    (plugin,) = study["plugins"]
    assert plugin["provides"] == {"norms": ["rmsnorm"], "methods": ["rmsnorm"], "knobs": ["rms_eps"]}
    with running_service.client() as client:
        results = client.get(f"/results/{spec['dataset']}", params={"study": study_id}).json()

    methods = {row["method"] for row in results["rows"]}
    assert methods == {"rmsnorm", "frozen_ln", "dyt"}
    trials = _trials(running_service, study_id)
    tuned = [t for t in trials if t.method == "rmsnorm" and t.phase == "tune"]
    assert len(tuned) == spec["num_samples"] and all(t.status == "succeeded" for t in tuned)
    sampled = [t.config["knobs"]["rms_eps"] for t in tuned]
    assert all(1e-7 <= eps <= 1e-3 for eps in sampled) and len(set(sampled)) == len(sampled)

    client = MlflowClient(running_service.mlflow_url)
    runs = client.search_runs([study["mlflow_experiment_id"]], max_results=100)
    parent = next(r for r in runs if r.data.tags.get("normlab.role") == "parent")
    folder = f"plugins/{plugin['package']}"
    stored = client.download_artifacts(parent.info.run_id, f"{folder}/__init__.py")
    assert Path(stored).read_text() == (EXAMPLES / "rmsnorm.py").read_text()
    child = next(r for r in runs if r.data.params.get("method") == "rmsnorm")
    assert 1e-7 <= float(child.data.params["knobs.rms_eps"]) <= 1e-3


def test_a_study_on_a_dataset_from_the_user_s_own_file_and_a_dataset_plugin(running_service, tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    images = rng.uniform(size=(300, 1, 8, 8)).astype("float32")
    labels = (images[:, 0, :4].mean(axis=(1, 2)) > images[:, 0, 4:].mean(axis=(1, 2))).astype("int64")
    np.savez(tmp_path / "halves.npz", x=images, y=labels)
    spec = {
        "name": "user file and dataset plugin",
        "dataset": "halves",
        "model": "vit_lite_tiny",
        "methods": ["frozen_ln", "dyt"],
        "num_samples": 1,
        "seeds": [0, 1],
        "budget": {"epochs": 2, "batch_size": 64},
        "user_datasets": [
            {"name": "halves", "path": str(tmp_path / "halves.npz"), "task": "image_classification"}
        ],
        # The toy dataset plugin rides along: registered on every node, unused by this study's rows.
        "plugins": [
            {"path": "toy_dataset.py", "files": {"__init__.py": (EXAMPLES / "toy_dataset.py").read_text()}}
        ],
    }
    study = _run_to_end(running_service, spec)
    with running_service.client() as client:
        results = client.get("/results/halves", params={"study": study["id"]}).json()
    assert {row["method"] for row in results["rows"]} == {"frozen_ln", "dyt"}
    assert results["metric"] == "accuracy"
