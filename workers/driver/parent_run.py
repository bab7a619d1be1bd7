"""The study's MLflow experiment and parent run: created once, found again after a driver restart."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

__all__ = ["ParentRun", "ensure_parent_run", "environment_versions", "git_revision"]

PARENT_ROLE_TAG = "normlab.role"
_PACKAGES = ("normlab", "torch", "ray", "mlflow", "optuna", "numpy", "scipy", "sqlalchemy", "fastapi")


@dataclass(frozen=True)
class ParentRun:
    experiment_id: str
    run_id: str


def environment_versions() -> dict[str, str]:
    versions = {}
    for package in _PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def git_revision() -> str:
    """The source revision the driver runs (installed trees without .git report `unknown`)."""
    repo = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def experiment_name(study_name: str, study_id: str) -> str:
    return f"normlab/{study_name}/{study_id}"


def ensure_parent_run(
    client: MlflowClient, *, study_id: str, study_name: str, dataset: str, spec: dict[str, Any]
) -> ParentRun:
    name = experiment_name(study_name, study_id)
    experiment = client.get_experiment_by_name(name)
    experiment_id = (
        experiment.experiment_id
        if experiment is not None
        else client.create_experiment(name, tags={"normlab.study_id": study_id, "normlab.dataset": dataset})
    )
    found = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`normlab.study_id` = '{study_id}' and tags.`{PARENT_ROLE_TAG}` = 'parent'",
        max_results=1,
    )
    if found:
        return ParentRun(experiment_id=experiment_id, run_id=found[0].info.run_id)
    run = client.create_run(
        experiment_id,
        run_name=f"study {study_name}",
        tags={"normlab.study_id": study_id, PARENT_ROLE_TAG: "parent", "normlab.dataset": dataset},
    )
    run_id = run.info.run_id
    versions = environment_versions()
    client.log_dict(run_id, spec, "study_spec.json")
    client.log_dict(run_id, versions, "environment.json")
    client.set_tag(run_id, "normlab.git_revision", git_revision())
    for package, version in versions.items():
        client.set_tag(run_id, f"normlab.version.{package}", version)
    client.log_param(run_id, "spec_json", json.dumps(spec, sort_keys=True)[:6000])
    return ParentRun(experiment_id=experiment_id, run_id=run_id)
