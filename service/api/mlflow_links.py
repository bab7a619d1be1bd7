"""Links into the MLflow UI, in its training view: the one place NormLab builds them.

MLflow 3's UI shows an experiment either as GenAI work (traces, judges, prompts) or as model training
(runs, metric charts), by a browser-wide setting (local storage `mlflow.workflowType`) whose default is
GenAI; the experiment's `mlflow.experimentKind` tag no longer decides it. A `workflowType=machine_learning`
query overrides the setting on the page it is on (the UI's WorkflowTypeProvider reads it before local
storage), so every MLflow link NormLab prints or serves is built here and carries it. The UI routes in
the URL's fragment (a hash router): `/#/experiments/<id>` and `/#/experiments/<id>/runs/<run id>`.

MLflow's own client prints a "View run ... at: <url>" line, in the GenAI view, for every run it ends;
NormLab's processes run with QUIET_RUN_URLS_ENV, which turns those lines off.
"""

from __future__ import annotations

from urllib.parse import quote, urlparse

__all__ = ["QUIET_RUN_URLS_ENV", "TRAINING_VIEW_QUERY", "mlflow_ui_url"]

TRAINING_VIEW_QUERY = "workflowType=machine_learning"
QUIET_RUN_URLS_ENV = {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


def mlflow_ui_url(
    tracking_uri: str, *, experiment_id: str | None = None, run_id: str | None = None
) -> str | None:
    """The UI page, in the training view, of run `run_id` of experiment `experiment_id`, of the experiment,
    or (neither given) of the experiment list. None when `tracking_uri` is no HTTP server: a file store or
    a database has no UI to link to."""
    if urlparse(tracking_uri).scheme not in ("http", "https"):
        return None
    if run_id is not None and experiment_id is None:
        raise ValueError("a run's page lies under its experiment: give experiment_id with run_id")
    route = "/experiments"
    if experiment_id is not None:
        route += f"/{quote(experiment_id, safe='')}"
    if run_id is not None:
        route += f"/runs/{quote(run_id, safe='')}"
    return f"{tracking_uri.rstrip('/')}/#{route}?{TRAINING_VIEW_QUERY}"
