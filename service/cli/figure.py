"""`normlab figure <dataset> <name>`: one figure of a results page written to a file, as SVG or PDF.

The figure comes from GET /results/{dataset}/figures/{name}.{svg|pdf} with the options `normlab results`
takes, so the file is the figure the results page shows for them; an unknown name fails with the names
the page has (the API's 404 lists them).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import typer
from rich.markup import escape

from service.cli import client as api
from service.settings import Settings

__all__ = ["FIGURE_FORMATS", "figure"]

FIGURE_FORMATS = ("svg", "pdf")


def figure(
    dataset: str = typer.Argument(..., help="dataset name, e.g. digits"),
    name: str = typer.Argument(..., help="figure name, e.g. forest_plot (an unknown one lists them all)"),
    format: str | None = typer.Option(
        None, "--format", "-f", help="svg | pdf (default: the --output file's suffix, else svg)"
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", dir_okay=False, help="the file to write (default: <dataset>_<name>.<format>)"
    ),
    study: str | None = typer.Option(None, "--study", help="study id(s), comma-separated, or `all`"),
    metric: str | None = typer.Option(None, "--metric", help="metric (default: the dataset's primary one)"),
    reference: str | None = typer.Option(None, "--reference", help="reference method (default: the study's)"),
    pool: bool = typer.Option(
        False, "--pool", help="pool named studies whose specs differ in more than their seeds (else refused)"
    ),
) -> None:
    """Write one figure of a dataset's results page (forest plot, mechanism evidence, tuning) as SVG or PDF."""
    fmt = format or _format_of(output)
    if fmt not in FIGURE_FORMATS:
        raise _fail(f"unknown format '{fmt}'; choose one of {', '.join(FIGURE_FORMATS)}")
    target = output or Path(f"{dataset}_{name}.{fmt}")
    params = {
        key: value for key, value in (("study", study), ("metric", metric), ("reference", reference)) if value
    } | ({"pool": "true"} if pool else {})
    path = f"/results/{quote(dataset, safe='')}/figures/{quote(name, safe='')}.{fmt}"
    try:
        with api.ApiClient(str(Settings().api_url)) as client:
            content = client.request("GET", path, params=params).content
    except api.CliError as error:
        raise _fail(str(error)) from None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    except OSError as exc:
        raise _fail(f"cannot write {target}: {exc.strerror or exc}; choose another --output") from None
    api.console.print(
        f"wrote {name} of {dataset} as {fmt.upper()} to {target}", markup=False, highlight=False
    )


def _format_of(output: Path | None) -> str:
    suffix = output.suffix.lower().lstrip(".") if output is not None else ""
    return suffix if suffix in FIGURE_FORMATS else "svg"


def _fail(message: str) -> typer.Exit:
    # As the other commands fail (service.cli.commands): the message on stderr, exit code 1.
    api.err_console.print(f"[red]error:[/] {escape(message)}", markup=True, highlight=False)
    return typer.Exit(code=1)
