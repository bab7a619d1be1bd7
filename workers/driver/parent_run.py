"""The study's MLflow experiment and parent run: created once, found again after a driver restart; when the
study ends, its results table and evidence figures are saved with the parent run."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from mlflow.entities import Param, RunTag
from mlflow.tracking import MlflowClient
from sqlalchemy.engine import Engine

from studies.provenance import git_revision, package_versions

__all__ = [
    "EXPERIMENT_KIND",
    "EXPERIMENT_KIND_TAG",
    "RESULTS_ARTIFACT_DIR",
    "ParentRun",
    "ensure_experiment",
    "ensure_parent_run",
    "log_results_artifacts",
]

log = logging.getLogger(__name__)

PARENT_ROLE_TAG = "normlab.role"
# The experiment's kind, "custom_model_development": model training (runs, metric charts). MLflow 3.17's
# UI (workflow-based navigation) no longer reads it and opens the view the browser last chose, GenAI by
# default; NormLab's links name the view instead (service.api.mlflow_links).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
RESULTS_ARTIFACT_DIR = "results"


@dataclass(frozen=True)
class ParentRun:
    experiment_id: str
    run_id: str


def experiment_name(study_name: str, study_id: str) -> str:
    return f"normlab/{study_name}/{study_id}"


def ensure_experiment(client: MlflowClient, *, study_id: str, study_name: str, dataset: str) -> str:
    """The id of the study's MLflow experiment, created when it does not exist yet."""
    name = experiment_name(study_name, study_id)
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return client.create_experiment(
            name,
            tags={
                "normlab.study_id": study_id,
                "normlab.dataset": dataset,
                EXPERIMENT_KIND_TAG: EXPERIMENT_KIND,
            },
        )
    if experiment.tags.get(EXPERIMENT_KIND_TAG) is None:  # created before the tag was set
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return experiment.experiment_id


def ensure_parent_run(
    client: MlflowClient,
    *,
    study_id: str,
    study_name: str,
    dataset: str,
    spec: dict[str, Any],
    experiment_id: str | None = None,
) -> ParentRun:
    """The study's parent run in `experiment_id` (None: the study's experiment, created if need be): the one
    an earlier driver of the study created, else a new one with the spec and the environment.

    A new run is closed KILLED if the driver is stopped (a cancel: SIGTERM, raised as SystemExit) before
    this returns it, since the caller could not close a run it never got.
    """
    if experiment_id is None:
        experiment_id = ensure_experiment(client, study_id=study_id, study_name=study_name, dataset=dataset)
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
    try:
        _describe_parent_run(client, run_id, spec)
    except (KeyboardInterrupt, SystemExit):
        _terminate_quietly(client, run_id, "KILLED")
        raise
    return ParentRun(experiment_id=experiment_id, run_id=run_id)


def _describe_parent_run(client: MlflowClient, run_id: str, spec: dict[str, Any]) -> None:
    """The spec and the environment (package versions, git revision) on a new parent run."""
    versions = package_versions()
    client.log_dict(run_id, spec, "study_spec.json")
    client.log_dict(run_id, versions, "environment.json")
    _log_plugins(client, run_id, spec)
    # One request for every tag and the param: each is a round trip the study's first trials wait for.
    tags = {"normlab.git_revision": git_revision()} | {
        f"normlab.version.{package}": version for package, version in versions.items()
    }
    client.log_batch(
        run_id,
        params=[Param("spec_json", json.dumps(spec, sort_keys=True)[:6000])],
        tags=[RunTag(key, value) for key, value in tags.items()],
        synchronous=True,
    )


def _log_plugins(client: MlflowClient, run_id: str, spec: dict[str, Any]) -> None:
    """Each plugin's source as the study stored it, under plugins/<package>/, and what it registered."""
    for entry in spec.get("plugins") or ():
        folder = f"plugins/{entry['package']}"
        for name, text in (entry.get("files") or {}).items():
            client.log_text(run_id, text, f"{folder}/{name}")
        manifest = {
            k: entry.get(k) for k in ("path", "entry_point", "sha256", "package", "distribution", "provides")
        }
        client.log_dict(run_id, manifest, f"{folder}/plugin.json")


def _terminate_quietly(client: MlflowClient, run_id: str, status: str) -> None:
    try:
        client.set_terminated(run_id, status=status)
    except Exception as exc:  # the reconcile loop closes it once the study has ended
        log.warning("could not close the MLflow parent run %s: %s", run_id, exc)


def log_results_artifacts(client: MlflowClient, run_id: str, *, engine: Engine, study_id: str) -> list[str]:
    """Save the study's results table (html, md, json), its evidence (json), its knob importance and
    optimisation history (tuning.json, when it tuned or swept) and every figure (svg) under `results/` of
    the parent run; returns the artifact paths written.

    Best-effort: the database and MLflow both hold the results already, so any failure (a tracking
    outage, a locked database) is logged as a warning and never raised to the study.
    """
    from studies.store import session_scope
    from studies.store.results import study_results
    from studies.tables.render_evidence_svg import evidence_figures, standalone_svg
    from studies.tables.render_html import to_html
    from studies.tables.render_svg import forest_plot_svg
    from studies.tables.render_tuning_svg import tuning_figures

    written: list[str] = []
    try:
        with session_scope(engine, readonly=True) as session:
            results = study_results(session, study_id=study_id)
        if results is None:
            return written
        table, evidence, tuning = results.table, results.evidence, results.tuning
        texts = {
            "results.html": to_html(table, evidence=evidence, tuning=[tuning] if tuning else []),
            "results.md": table.to_markdown(),
            "figures/forest_plot.svg": standalone_svg(forest_plot_svg(table)),
        }
        texts.update(
            {
                f"figures/{figure.name}.svg": standalone_svg(figure.svg)
                for figure in evidence_figures(evidence)
            }
        )
        payloads = {"results.json": table.to_json(), "evidence.json": evidence.to_json()}
        if tuning is not None:
            payloads["tuning.json"] = tuning.to_json()
            texts.update({f"figures/{f.name}.svg": standalone_svg(f.svg) for f in tuning_figures(tuning)})
        for path, payload in payloads.items():
            client.log_dict(run_id, payload, f"{RESULTS_ARTIFACT_DIR}/{path}")
            written.append(f"{RESULTS_ARTIFACT_DIR}/{path}")
        for path, text in texts.items():
            client.log_text(run_id, text, f"{RESULTS_ARTIFACT_DIR}/{path}")
            written.append(f"{RESULTS_ARTIFACT_DIR}/{path}")
    except Exception as exc:
        log.warning(
            "could not save the results of study %s with its MLflow run (%d artifact(s) saved): %s",
            study_id,
            len(written),
            exc,
        )
    return written
