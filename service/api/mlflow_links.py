"""Links into the MLflow UI, in its training view: the one place NormLab builds them.

MLflow 3's UI shows an experiment either as GenAI work (traces, judges, prompts) or as model training
(runs, metric charts), by a browser-wide setting (local storage `mlflow.workflowType`) whose default is
GenAI; the experiment's `mlflow.experimentKind` tag no longer decides it. A `workflowType=machine_learning`
query overrides the setting on the page it is on (the UI's WorkflowTypeProvider reads it before local
storage), so every MLflow link NormLab prints or serves is built here and carries it. The UI routes in
the URL's fragment (a hash router): `/#/experiments/<id>` and `/#/experiments/<id>/runs/<run id>`.

MLflow's own client prints a "View run ... at: <url>" line, in the GenAI view, for every run it ends;
NormLab's processes run with QUIET_RUN_URLS_ENV, which turns those lines off.

An MLflow with sign-in (the local stack's by default, compose's always) asks a browser for a user and
password once per session; the pages that link it say whom to sign in as (mlflow_sign_in_user).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import quote, urlparse

__all__ = ["QUIET_RUN_URLS_ENV", "TRAINING_VIEW_QUERY", "mlflow_sign_in_user", "mlflow_ui_url"]

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


def mlflow_sign_in_user(environ: Mapping[str, str] | None = None) -> str | None:
    """The user MLflow's UI asks a browser to sign in as: the one this service signs in with (MLflow's
    client reads MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD), None where it signs in as nobody."""
    env = os.environ if environ is None else environ
    username = env.get("MLFLOW_TRACKING_USERNAME")
    return username if username and env.get("MLFLOW_TRACKING_PASSWORD") else None
