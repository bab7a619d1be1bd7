"""The `normlab` command line: start the stack, submit studies, follow them, print results.

The API address and token come from the settings (NORMLAB_API_URL, NORMLAB_API_TOKEN) or, for the token,
the file `normlab serve` writes into the data dir. Every failure prints what to do about it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from service.auth import read_api_token
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
# Piped output (CI logs, `make demo` under a pager) gets a width a results table fits in, not 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
_FORMATS = ("table", "json", "csv", "md", "html")


class CliError(Exception):
    """A failure the user can act on; the message says how."""


def make_http_client(api_url: str, token: str | None) -> httpx.Client:
    """The HTTP client every command uses (tests swap in FastAPI's TestClient)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=api_url, headers=headers, timeout=30.0)


class ApiClient:
    """Thin HTTP wrapper that turns transport and HTTP errors into CliError messages."""

    def __init__(self, api_url: str, token: str | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self._http = make_http_client(self.api_url, token)

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise CliError(
                f"cannot reach the API at {self.api_url}: start it with `make run` (or `normlab serve`), "
                "or point NORMLAB_API_URL at a running server"
            ) from exc
        except httpx.HTTPError as exc:
            raise CliError(
                f"the request to {self.api_url}{path} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise CliError(_describe_failure(response, self.api_url))
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()


def _describe_failure(response: httpx.Response, api_url: str) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text.strip()
    code = response.status_code
    if code == 401:
        return (
            f"the API at {api_url} refused the request ({detail}): set NORMLAB_API_TOKEN to the server's "
            "token (`normlab token` prints it on the server machine)"
        )
    if code == 422 and isinstance(detail, list):
        return _spec_problems(detail)
    if code >= 500:
        return f"the API failed ({code}): {detail}; see the `normlab serve` log"
    return f"{detail} ({code})"


def _spec_problems(errors: list[dict[str, Any]]) -> str:
    """Validation errors (the API's 422 detail, or pydantic's) as one line per field path."""
    lines = ["the study spec is invalid:"]
    for error in errors:
        loc = ".".join(str(part) for part in error.get("loc", []) if part != "body") or "(spec)"
        lines.append(f"  {loc}: {error.get('msg')}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- reusable steps


def check_spec_text(spec_text: str, *, content_type: str = "application/yaml") -> None:
    """Parse and validate a spec here as the API does (minus the server's size limits), so a spec the
    API would refuse is reported, with the fix, before anything is sent."""
    from pydantic import ValidationError

    from service.routes.spec_body import json_problems
    from studies.spec import parse_spec_text, validate_spec_data

    unsent = "nothing was sent: fix the file and submit it again"
    try:
        data = parse_spec_text(spec_text, content_type)
    except (ValueError, TypeError, RecursionError) as exc:  # SpecFormatError is a ValueError
        raise CliError(f"{exc}\n({unsent})") from exc
    problems = json_problems(data)
    if not problems:
        try:
            validate_spec_data(data)
            return
        except ValidationError as exc:
            problems = exc.errors(include_url=False)
    raise CliError(f"{_spec_problems(problems)}\n({unsent})")


def submit_spec_text(
    api_url: str, api_token: str | None, spec_text: str, *, content_type: str = "application/yaml"
) -> dict[str, Any]:
    """POST a spec; returns the stored study (id, status, progress, ...)."""
    with ApiClient(api_url, api_token) as api:
        return api.json(
            "POST", "/studies", content=spec_text.encode("utf-8"), headers={"Content-Type": content_type}
        )


def follow_study(api_url: str, study_id: str, *, poll_s: float = 2.0) -> dict[str, Any]:
    """Show a progress bar until the study finishes; returns its final state."""
    with (
        ApiClient(api_url) as api,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trials"),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
    ):
        study = api.json("GET", f"/studies/{study_id}")
        task = progress.add_task(_progress_label(study), total=study["progress"]["planned"] or None)
        while True:
            progress.update(task, description=_progress_label(study), completed=study["progress"]["done"])
            if study["status"] in TERMINAL:
                return study
            time.sleep(poll_s)
            study = api.json("GET", f"/studies/{study_id}")


def _progress_label(study: dict[str, Any]) -> str:
    p = study["progress"]
    failed = f", {p['failed']} failed" if p["failed"] else ""
    return f"{study['name']} ({study['status']}{failed})"


def print_results(
    api_url: str,
    dataset: str,
    *,
    study_id: str | None = None,
    fmt: str = "table",
    reference: str | None = None,
) -> None:
    """Print the results table: a rich table, or the API's json / csv / md / html text as is."""
    params: dict[str, str] = {"format": "json" if fmt == "table" else fmt}
    if study_id:
        params["study"] = study_id
    if reference:
        params["reference"] = reference
    with ApiClient(api_url) as api:
        response = api.request("GET", f"/results/{dataset}", params=params)
    if fmt == "table":
        console.print(results_table(response.json()))
    else:
        console.print(response.text, markup=False, highlight=False, soft_wrap=True)


def fetch_report(api_url: str, study_id: str, *, fmt: str = "md") -> str:
    """A study's report (GET /studies/{id}/report) as md, html or json text."""
    with ApiClient(api_url) as api:
        return api.request("GET", f"/studies/{study_id}/report", params={"format": fmt}).text


def results_table(payload: dict[str, Any]) -> Table:
    """The results JSON as a rich table (the same rows the md/html renderings show)."""
    rows = payload.get("rows", [])
    confidence = rows[0].get("confidence", 0.95) if rows else 0.95
    table = Table(
        title=f"{payload['dataset']}: {payload['metric']} (reference {payload['reference']})",
        caption=f"{confidence:.0%} t intervals over seeds; p adjusted across rows ({_adjustment(rows)})",
    )
    for header in ("method", "n", "mean", "CI", "Δ vs ref", "Δ CI", "p", "p adj", "effect", "verdict"):
        table.add_column(header, justify="left" if header in ("method", "verdict") else "right")
    with_paper = any(row.get("paper_value") is not None for row in rows)
    if with_paper:
        table.add_column("paper", justify="right")
    for row in rows:
        label = row["method"] if not row.get("group") else f"{row['method']} [{row['group']}]"
        n = f"{row['n']}/{row['n_planned']}" if row.get("n_planned") else str(row["n"])
        cells = [
            label + (" (ref)" if row.get("is_reference") else ""),
            n,
            _num(row.get("mean")),
            _interval(row.get("ci_low"), row.get("ci_high")),
            _num(row.get("diff_mean"), signed=True),
            _interval(row.get("diff_ci_low"), row.get("diff_ci_high")),
            _p(row.get("p_value")),
            _p(row.get("p_adjusted")),
            _num(row.get("effect_size")),
            str(row.get("verdict", "")),
        ]
        if with_paper:
            cells.append(_num(row.get("paper_value")))
        table.add_row(*cells)
    return table


def _adjustment(rows: list[dict[str, Any]]) -> str:
    return str(rows[0].get("adjustment", "holm")) if rows else "holm"


def _num(x: float | None, *, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.4g}" if signed else f"{x:.4g}"


def _interval(low: float | None, high: float | None) -> str:
    return "–" if low is None or high is None else f"[{low:.4g}, {high:.4g}]"


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


# ---------------------------------------------------------------------------------------- commands


def _settings() -> Settings:
    return Settings()


def _client_token(settings: Settings) -> str | None:
    return read_api_token(settings)


def _fail(error: CliError) -> typer.Exit:
    # Escaped: messages quote logs and URLs, whose brackets are no markup.
    err_console.print(f"[red]error:[/] {escape(str(error))}", markup=True, highlight=False)
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
    from service.launcher import serve as run_stack  # heavy (Ray, uvicorn): imported only to serve
    from service.processes import ProcessStartError
    from service.stack_probe import StackUnavailableError

    try:
        run_stack(_settings(), demo=demo, api_only=api_only)
    except (StackUnavailableError, ProcessStartError) as error:
        raise _fail(CliError(str(error))) from None


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
    content_type = "application/json" if spec.suffix == ".json" else "application/yaml"
    spec_text = spec.read_text(encoding="utf-8")
    token = _client_token(settings)
    try:
        check_spec_text(spec_text, content_type=content_type)
        if token is None:
            raise CliError(
                f"no API token: set NORMLAB_API_TOKEN, or run `make run` once on this machine "
                f"(it writes {settings.api_token_path})"
            )
        study = submit_spec_text(settings.api_url, token, spec_text, content_type=content_type)
        console.print(
            f"submitted [bold]{study['name']}[/] as study [bold cyan]{study['id']}[/] "
            f"({study['progress']['planned']} trials planned, status {study['status']})"
        )
        if not wait:
            console.print(f"follow it with `normlab status {study['id']}`")
            return
        try:
            final = follow_study(settings.api_url, study["id"], poll_s=poll)
        except KeyboardInterrupt:
            console.print(
                f"stopped watching; the study keeps running (`normlab status {study['id']}`, "
                f"`normlab cancel {study['id']}`)"
            )
            raise typer.Exit(code=130) from None
        _print_outcome(final)
        if final["status"] == "succeeded":
            print_results(settings.api_url, final["dataset"], study_id=final["id"])
        else:
            raise typer.Exit(code=1)
    except CliError as error:
        raise _fail(error) from None


def _print_outcome(study: dict[str, Any]) -> None:
    colour = {"succeeded": "green", "failed": "red", "cancelled": "yellow"}.get(study["status"], "white")
    console.print(f"study {study['id']} [{colour}]{study['status']}[/]")
    if study.get("error"):
        console.print(study["error"], markup=False, highlight=False)


@app.command()
def status(study_id: str = typer.Argument(..., help="the study id `submit` printed")) -> None:
    """Show a study's status and progress."""
    settings = _settings()
    try:
        with ApiClient(settings.api_url) as api:
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
    if study.get("ray_job_id"):
        table.add_row("ray job", study["ray_job_id"])
    if study.get("mlflow_experiment_id"):
        table.add_row("mlflow experiment", study["mlflow_experiment_id"])
    if study.get("error"):
        table.add_row("error", study["error"])
    console.print(table)


@app.command()
def results(
    dataset: str = typer.Argument(..., help="dataset name, e.g. digits"),
    format: str = typer.Option("table", "--format", "-f", help="table | json | csv | md | html"),
    study: str | None = typer.Option(None, "--study", help="study id(s), comma-separated, or `all`"),
    reference: str | None = typer.Option(None, "--reference", help="reference method (default: the study's)"),
) -> None:
    """Print the results table of a dataset (confidence intervals, paired tests vs the reference)."""
    if format not in _FORMATS:
        raise _fail(CliError(f"unknown format '{format}'; choose one of {', '.join(_FORMATS)}"))
    settings = _settings()
    try:
        print_results(settings.api_url, dataset, study_id=study, fmt=format, reference=reference)
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
        text = fetch_report(settings.api_url, study_id, fmt=format)
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


@app.command()
def cancel(study_id: str = typer.Argument(..., help="the study id to cancel")) -> None:
    """Cancel a study: a queued one at once, a running one by stopping its Ray job."""
    settings = _settings()
    try:
        token = _client_token(settings)
        if token is None:
            raise CliError(
                "no API token: set NORMLAB_API_TOKEN to the server's token (`normlab token` prints it on "
                "the server machine)"
            )
        with ApiClient(settings.api_url, token) as api:
            study = api.json("POST", f"/studies/{study_id}/cancel")
    except CliError as error:
        raise _fail(error) from None
    _print_outcome(study)


@app.command()
def studies(
    status_filter: str | None = typer.Option(None, "--status", help="queued | running | succeeded | ..."),
    dataset: str | None = typer.Option(None, "--dataset"),
) -> None:
    """List studies, newest first."""
    settings = _settings()
    params = {k: v for k, v in {"status": status_filter, "dataset": dataset}.items() if v}
    try:
        with ApiClient(settings.api_url) as api:
            listed = api.json("GET", "/studies", params=params)
    except CliError as error:
        raise _fail(error) from None
    table = Table("id", "name", "dataset", "status", "trials", "created")
    for study in listed:
        p = study["progress"]
        table.add_row(
            study["id"],
            study["name"],
            study["dataset"],
            study["status"],
            f"{p['done']}/{p['planned']}",
            study["created_at"],
        )
    console.print(table)


@app.command()
def token() -> None:
    """Print the API token (NORMLAB_API_TOKEN, or the one the server stored in the data dir)."""
    settings = _settings()
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


if __name__ == "__main__":  # pragma: no cover
    app()
