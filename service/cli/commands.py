"""The `normlab` command line: start the stack, submit studies, follow them, print results.

The API address and token come from the settings (NORMLAB_API_URL, NORMLAB_API_TOKEN) or, for the token,
the file `normlab serve` writes into the data dir. Every failure prints what to do about it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import typer
from rich.markup import escape
from rich.table import Table

from service.auth import read_api_token, read_mlflow_password, read_ray_auth_token
from service.cli import figure as figure_command
from service.cli.client import (
    _FORMATS,
    ApiClient,
    CliError,
    check_spec_text,
    console,
    err_console,
    fetch_report,
    follow_study,
    make_http_client,
    plan_spec_text,
    print_results,
    render_plan,
    submit_spec_text,
)
from service.cli.plugin_files import plugin_token_or_fail, spec_to_send
from service.settings import Settings

__all__ = [
    "ApiClient",
    "CliError",
    "app",
    "check_spec_text",
    "fetch_report",
    "follow_study",
    "make_http_client",
    "print_results",
    "submit_spec_text",
]

app = typer.Typer(
    name="normlab",
    help="NormLab: sweep and compare normalization methods on Ray, with seed-wise statistics.",
    no_args_is_help=True,
    add_completion=False,
)
# ---------------------------------------------------------------------------------------- commands


def _settings() -> Settings:
    return Settings()


def _client_token(settings: Settings) -> str | None:
    return read_api_token(settings)


def _fail(error: CliError, *, soft_wrap: bool = False) -> typer.Exit:
    # Escaped: messages quote logs and URLs, whose brackets are no markup. `soft_wrap`: the message's own
    # lines only, not cut at the console's width, so a log keeps it on the one line a grep finds.
    err_console.print(
        f"[red]error:[/] {escape(str(error))}", markup=True, highlight=False, soft_wrap=soft_wrap
    )
    return typer.Exit(code=1)


@app.command()
def serve(
    demo: bool = typer.Option(False, "--demo", help="also submit the quick example and print its results"),
    api_only: bool = typer.Option(
        False,
        "--api-only",
        help="start only the API, on the MLflow server and Ray cluster already running at "
        "MLFLOW_TRACKING_URI and RAY_ADDRESS (or the local stack's ports); fail if they do not answer",
    ),
):
    """Start MLflow, a local Ray head and the API; Ctrl-C stops what it started.

    An MLflow server or Ray head already answering at the configured ports is attached to (and left
    running) instead of started; RAY_ADDRESS points at a cluster elsewhere.
    """
    from service.stack.launcher import serve as run_stack  # heavy (Ray, uvicorn): imported only to serve
    from service.stack.probe import StackUnavailableError
    from service.stack.processes import ProcessStartError
    from studies.store.engine import DatabaseCorruptError

    try:
        run_stack(_settings(), demo=demo, api_only=api_only)
    # A damaged database file is found by the migration, before anything is started: its message names
    # the file and what to do, which a traceback through Alembic would bury.
    except (StackUnavailableError, ProcessStartError, DatabaseCorruptError) as error:
        raise _fail(CliError(str(error)), soft_wrap=True) from None


@app.command()
def submit(
    spec: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="a .yaml or .json StudySpec"
    ),
    wait: bool = typer.Option(
        False, "--wait", help="follow the study with a progress bar, then print results"
    ),
    poll: float = typer.Option(2.0, help="seconds between progress polls"),
) -> None:
    """Submit a study spec, checked here first as the API would; prints its id (--wait: the results)."""
    settings = _settings()
    try:
        spec_text, content_type, token = spec_to_send(spec, settings, api_token=_client_token(settings))
        study = submit_spec_text(str(settings.api_url), token, spec_text, content_type=content_type)
        planned = study["progress"]["planned"]
        bound = (
            f"up to {planned} trials: sequential seeds"
            if study["spec"].get("sequential")
            else f"{planned} trials planned"
        )
        console.print(
            f"submitted [bold]{study['name']}[/] as study [bold cyan]{study['id']}[/] "
            f"({bound}, status {study['status']})"
        )
        if not wait:
            console.print(f"follow it with `normlab status {study['id']}`")
            return
        try:
            final = follow_study(str(settings.api_url), study["id"], poll_s=poll)
        except KeyboardInterrupt:
            console.print(
                f"stopped watching; the study keeps running (`normlab status {study['id']}`, "
                f"`normlab cancel {study['id']}`)"
            )
            raise typer.Exit(code=130) from None
        _print_outcome(final)
        if final["status"] == "succeeded":
            print_results(str(settings.api_url), final["dataset"], study_id=final["id"])
        else:
            raise typer.Exit(code=1)
    except CliError as error:
        raise _fail(error) from None


@app.command()
def plan(
    spec: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="a .yaml or .json StudySpec"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the API's JSON plan as it came"),
) -> None:
    """What a study would take before it runs: trials, GPU-hours, wall time here, seeds for power.

    Asks the API (POST /plans), which reads earlier studies of the same dataset and model; nothing is
    stored or run. A sequential design is also simulated to give its expected seeds.
    """
    settings = _settings()
    try:
        spec_text, content_type, token = spec_to_send(spec, settings, api_token=_client_token(settings))
        planned = plan_spec_text(str(settings.api_url), token, spec_text, content_type=content_type)
    except CliError as error:
        raise _fail(error) from None
    if as_json:
        console.print_json(data=planned)
        return
    console.print(render_plan(planned), markup=False, highlight=False, soft_wrap=True)


def _print_outcome(study: dict[str, Any]) -> None:
    colour = {"succeeded": "green", "failed": "red", "cancelled": "yellow"}.get(study["status"], "white")
    console.print(f"study {study['id']} [{colour}]{study['status']}[/]")
    if study.get("error"):
        console.print(study["error"], markup=False, highlight=False)


@app.command()
def status(
    study_id: str | None = typer.Argument(
        None, help="the study id `submit` printed; none: whether the service could run a study now"
    ),
) -> None:
    """Show a study's status and progress; without a study, whether the service could run one now."""
    settings = _settings()
    if study_id is None:
        _service_status(str(settings.api_url))
        return
    try:
        with ApiClient(str(settings.api_url)) as api:
            study = api.json("GET", f"/studies/{study_id}")
    except CliError as error:
        raise _fail(error) from None
    p = study["progress"]
    table = Table(show_header=False, box=None)
    table.add_row("study", f"{study['name']} ({study['id']})")
    table.add_row("dataset", f"{study['dataset']} ({study['kind']})")
    table.add_row("status", study["status"])
    table.add_row(
        "trials",
        f"{p['done']}/{p['planned']} done ({p['succeeded']} succeeded, {p['failed']} failed, "
        f"{p['cancelled']} cancelled), {p['running']} running",
    )
    sequential = study.get("sequential")
    if sequential:
        trials = sequential["trials"]
        table.add_row("sequential", f"{sequential['description']}; {len(sequential['looks'])} look(s) taken")
        for outcome in sequential["outcomes"]:
            table.add_row("", f"{outcome['method']} vs {sequential['reference']}: {outcome['decision_text']}")
        table.add_row("", f"{trials['run']} of the fixed design's {trials['fixed_design']} seed-trials")
    if study.get("ray_job_id"):
        table.add_row("ray job", study["ray_job_id"])
    if study["links"].get("mlflow"):  # the experiment in the UI's training view
        table.add_row("mlflow", study["links"]["mlflow"])
    elif study.get("mlflow_experiment_id"):  # a tracking URI with no UI (a file store)
        table.add_row("mlflow experiment", study["mlflow_experiment_id"])
    waiting = _waiting_submissions(study)
    if waiting:
        last = waiting[-1]
        retry = f"; next try {last['retry_at']}" if last.get("retry_at") else ""
        table.add_row(
            "submission", f"Ray did not take its driver ({len(waiting)} failed): {last['error']}{retry}"
        )
    if study.get("error"):
        table.add_row("error", study["error"])
    console.print(table)


def _waiting_submissions(study: dict[str, Any]) -> list[dict[str, Any]]:
    """The failed submissions of a driver attempt not running yet (studies.store's unsubmitted_failures)."""
    submitted = {attempt["number"] for attempt in study.get("attempts", [])}
    pending = [f for f in study.get("submit_failures", []) if f["attempt"] not in submitted]
    return [f for f in pending if f["attempt"] == pending[-1]["attempt"]] if pending else []


def _service_status(api_url: str) -> None:
    """GET /readyz as a table: each part a study needs (database, disk, MLflow, Ray) and what it said; exits
    1 when one is not ready, so scripts and health checks can use it."""
    try:
        with make_http_client(api_url, None) as http:
            answer = http.get("/readyz")
    except httpx.HTTPError as exc:
        raise _fail(
            CliError(
                f"cannot reach the API at {api_url}: start it with `make run` (or `normlab serve`), or point "
                f"NORMLAB_API_URL at a running server ({type(exc).__name__})"
            )
        ) from None
    if answer.status_code not in (200, 503):
        raise _fail(CliError(f"the API at {api_url} answered /readyz with HTTP {answer.status_code}"))
    readiness = answer.json()
    table = Table(show_header=False, box=None)
    for part in ("database", "disk", "mlflow", "ray"):
        check = readiness.get(part) or {}
        mark = "[green]ready[/]" if check.get("ready") else "[red]NOT READY[/]"
        table.add_row(part, mark, escape(str(check.get("detail", ""))))
    console.print(table)
    if readiness.get("status") != "ready":
        err_console.print("[red]not ready:[/] studies queue until each part above is ready")
        raise typer.Exit(code=1)
    console.print("ready: a study can run now")


@app.command()
def results(
    dataset: str = typer.Argument(..., help="dataset name, e.g. digits"),
    format: str = typer.Option(
        "table",
        "--format",
        "-f",
        help="table | json | csv | md | html | latex (a booktabs table for a paper)",
    ),
    study: str | None = typer.Option(None, "--study", help="study id(s), comma-separated, or `all`"),
    reference: str | None = typer.Option(None, "--reference", help="reference method (default: the study's)"),
    pool: bool = typer.Option(
        False, "--pool", help="pool named studies whose specs differ in more than their seeds (else refused)"
    ),
) -> None:
    """Print the results table of a dataset (confidence intervals, paired tests vs the reference)."""
    if format not in _FORMATS:
        raise _fail(CliError(f"unknown format '{format}'; choose one of {', '.join(_FORMATS)}"))
    settings = _settings()
    try:
        print_results(
            str(settings.api_url), dataset, study_id=study, fmt=format, reference=reference, pool=pool
        )
    except CliError as error:
        raise _fail(error) from None


_REPORT_FORMATS = ("md", "html", "json")


@app.command()
def report(
    study_id: str = typer.Argument(..., help="the study id `submit` printed"),
    format: str = typer.Option("md", "--format", "-f", help="md | html | json"),
    output: Path | None = typer.Option(None, "--output", "-o", dir_okay=False, help="write it to this file"),
) -> None:
    """A study's report: the paper claim it tests, paper vs measured, verdict, figures, provenance."""
    if format not in _REPORT_FORMATS:
        raise _fail(CliError(f"unknown format '{format}'; choose one of {', '.join(_REPORT_FORMATS)}"))
    settings = _settings()
    try:
        text = fetch_report(str(settings.api_url), study_id, fmt=format)
    except CliError as error:
        raise _fail(error) from None
    if output is None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        problem = exc.strerror or str(exc)
        raise _fail(CliError(f"cannot write {output}: {problem}; choose another --output")) from None
    console.print(f"wrote the {format} report of study {study_id} to {output}")


# `normlab figure`: a results page's figure as an SVG or PDF file (its own module, service.cli.figure).
app.command(name="figure")(figure_command.figure)


def _write_token(settings: Settings) -> str:
    """The token a command that changes something sends; CliError saying where to get it when there is none."""
    token = _client_token(settings)
    if token is None:
        raise CliError(
            "no API token: set NORMLAB_API_TOKEN to the server's token (`normlab token` prints it on "
            "the server machine)"
        )
    return token


@app.command()
def cancel(study_id: str = typer.Argument(..., help="the study id to cancel")) -> None:
    """Cancel a study: a queued one at once, a running one by stopping its Ray job."""
    settings = _settings()
    try:
        with ApiClient(str(settings.api_url), _write_token(settings)) as api:
            study = api.json("POST", f"/studies/{study_id}/cancel")
    except CliError as error:
        raise _fail(error) from None
    _print_outcome(study)


@app.command()
def tag(
    study_id: str = typer.Argument(..., help="the study id"),
    tags: list[str] | None = typer.Argument(
        None, help="tags to add (lowercase letters, digits, '-', '_', '.'); none: print the study's tags"
    ),
    remove: bool = typer.Option(False, "--remove", help="remove these tags instead of adding them"),
) -> None:
    """Add tags to a study (or remove them with --remove); the home page and `normlab studies --tag` filter
    by them."""
    from studies.store import tag_problem  # the store's rules: a bad tag is named before anything is sent

    settings = _settings()
    wanted = list(dict.fromkeys(tags or ()))
    try:
        problems = [problem for t in wanted if not remove and (problem := tag_problem(t))]
        if problems:
            raise CliError("; ".join(problems) + "; nothing was changed")
        with ApiClient(str(settings.api_url), _write_token(settings) if wanted else None) as api:
            current = api.json("GET", f"/studies/{study_id}")["tags"]
            if wanted:
                changed = [t for t in current if t not in wanted] if remove else sorted({*current, *wanted})
                current = api.json("PUT", f"/studies/{study_id}/tags", json={"tags": changed})["tags"]
    except CliError as error:
        raise _fail(error) from None
    listed = ", ".join(current) if current else "no tags"
    console.print(f"study {study_id}: {listed}", markup=False, highlight=False)


@app.command()
def delete(
    study_id: str = typer.Argument(..., help="the id of an ended study (succeeded, failed or cancelled)"),
    yes: bool = typer.Option(False, "--yes", help="do not ask for the id to be typed again"),
) -> None:
    """Delete an ended study with its trials and everything else stored about it; cannot be undone.

    Its MLflow runs are kept, the parent run tagged normlab.deleted=true. Without --yes the study is shown
    and its id must be typed again, as the API's `confirm` asks.
    """
    settings = _settings()
    try:
        token = _write_token(settings)
        with ApiClient(str(settings.api_url), token) as api:
            if not yes:
                study = api.json("GET", f"/studies/{study_id}")
                console.print(
                    f"study {study['id']} ({study['name']}, {study['dataset']}, {study['status']}, "
                    f"{study['progress']['done']} trials) is deleted with everything stored about it",
                    markup=False,
                    highlight=False,
                )
                typed = typer.prompt("type its id to delete it", default="", show_default=False)
                if typed.strip() != study_id:
                    raise CliError(f"the id typed is not {study_id}; nothing was deleted")
            deleted = api.json("DELETE", f"/studies/{study_id}", params={"confirm": study_id})
    except CliError as error:
        raise _fail(error) from None
    rows = deleted["deleted_rows"]
    console.print(
        f"deleted study {deleted['id']} ({deleted['name']}): {rows.get('trials', 0)} trials, "
        f"{rows.get('trial_epochs', 0)} epoch records",
        markup=False,
        highlight=False,
    )
    if deleted.get("mlflow_parent_run_id") or deleted.get("mlflow_experiment_id"):
        console.print(
            "its MLflow runs are kept; the parent run is tagged normlab.deleted=true (the server log says "
            "if MLflow did not take it)",
            markup=False,
            highlight=False,
        )


@app.command()
def studies(
    status_filter: str | None = typer.Option(None, "--status", help="queued | running | succeeded | ..."),
    dataset: str | None = typer.Option(None, "--dataset"),
    method: str | None = typer.Option(None, "--method", help="a method the study compares, e.g. dyt"),
    tags: list[str] | None = typer.Option(
        None, "--tag", help="a tag the study carries; repeated, it must carry every one"
    ),
    query: str | None = typer.Option(None, "--query", "-q", help="text in the name or description, any case"),
) -> None:
    """List studies, newest first; every filter given narrows the list."""
    settings = _settings()
    params: dict[str, Any] = {
        k: v
        for k, v in {
            "status": status_filter,
            "dataset": dataset,
            "method": method,
            "q": query,
            "tag": list(tags or ()),
        }.items()
        if v
    }
    try:
        with ApiClient(str(settings.api_url)) as api:
            listed = api.json("GET", "/studies", params=params)
    except CliError as error:
        raise _fail(error) from None
    table = Table("id", "name", "dataset", "status", "trials", "tags", "created")
    for study in listed:
        p = study["progress"]
        table.add_row(
            study["id"],
            escape(study["name"]),
            study["dataset"],
            study["status"],
            f"{p['done']}/{p['planned']}",
            ", ".join(study.get("tags", [])),
            study["created_at"],
        )
    console.print(table)


@app.command()
def token(
    mlflow: bool = typer.Option(
        False,
        "--mlflow",
        help="print the password of the local MLflow's user instead (the user: MLFLOW_TRACKING_USERNAME, "
        "default normlab), for its UI's sign-in or `curl -u`",
    ),
    plugin: bool = typer.Option(
        False, "--plugin", help="print the plugin token instead: the right to submit studies that run plugins"
    ),
    ray: bool = typer.Option(
        False,
        "--ray",
        help="print the Ray cluster's token instead, which the Ray dashboard's sign-in asks for (Ray's own "
        "hint, `ray get-auth-token`, does not look where NormLab keeps it)",
    ),
) -> None:
    """Print the API token (NORMLAB_API_TOKEN, or the one the server stored in the data dir); with --mlflow,
    the password MLflow's sign-in asks for (MLFLOW_TRACKING_PASSWORD, or the one stored there); with
    --ray, the token the Ray dashboard asks for (NORMLAB_RAY_AUTH_TOKEN, or the one stored there)."""
    settings = _settings()
    if mlflow:
        _print_mlflow_password(settings)
        return
    if ray:
        _print_ray_token(settings)
        return
    if plugin:
        try:
            print(plugin_token_or_fail(settings))
        except CliError as error:
            raise _fail(error) from None
        return
    found = read_api_token(settings)
    if found is None:
        # Never create one here: a token made on a client machine is one no server accepts.
        raise _fail(
            CliError(
                f"no API token: NORMLAB_API_TOKEN is not set and {settings.api_token_path} does not exist. "
                "The server creates the token when it starts (`make run` says where it keeps it); on the "
                "server machine run `normlab token`, and set NORMLAB_API_TOKEN here to what it prints"
            )
        )
    print(found)


def _print_ray_token(settings: Settings) -> None:
    found = read_ray_auth_token(settings)
    if found is None:
        raise _fail(
            CliError(
                f"no Ray token: NORMLAB_RAY_AUTH_TOKEN is not set and {settings.ray_auth_token_path} does not "
                "exist. `normlab serve` creates it when it first starts Ray; run this on that machine, with "
                "the same NORMLAB_DATA_DIR"
            )
        )
    print(found)


def _print_mlflow_password(settings: Settings) -> None:
    password = read_mlflow_password(settings)
    if password is None:
        raise _fail(
            CliError(
                f"no MLflow password: MLFLOW_TRACKING_PASSWORD is not set and {settings.mlflow_password_path} "
                "does not exist. `normlab serve` creates it when it first starts MLflow with sign-in (the "
                "default); run this on that machine, with the same NORMLAB_DATA_DIR"
            )
        )
    print(password)


if __name__ == "__main__":  # pragma: no cover
    app()
