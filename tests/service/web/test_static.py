"""The pages' static files (service/web/static): served by the app under /static with their content types,
shipped in the package (pyproject's package data), the vendored chart library with its licence beside it,
and the study page loading them from its own server only."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.factories import submit
from tests.service.web.store_rows import SPEC

REPO = Path(__file__).resolve().parents[3]
STATIC = REPO / "service" / "web" / "static"
UPLOT = STATIC / "vendor" / "uplot"
HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/static/plots.js", "text/javascript"),
        ("/static/plots.css", "text/css"),
        ("/static/vendor/uplot/uPlot.iife.min.js", "text/javascript"),
        ("/static/vendor/uplot/uPlot.min.css", "text/css"),
    ],
)
def test_each_static_file_is_served_with_its_content_type(client, path, content_type):
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == content_type
    assert response.content == (STATIC / path.removeprefix("/static/")).read_bytes()


def test_a_static_file_that_does_not_exist_is_404(client):
    assert client.get("/static/no-such-file.js").status_code == 404


def test_the_vendored_chart_library_is_uplot_with_its_mit_licence_beside_it():
    assert (
        (UPLOT / "uPlot.iife.min.js")
        .read_text()
        .startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
    )
    licence = (UPLOT / "LICENSE").read_text()
    assert licence.startswith("The MIT License (MIT)") and "Leon Sorokin" in licence


def test_the_package_ships_every_static_file():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    service = REPO / "service"
    # setuptools globs each pattern under the package's folder, `**` recursively.
    shipped = {p for pattern in package_data["service"] for p in service.glob(pattern) if p.is_file()}
    static = {p for p in STATIC.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert static and static <= shipped
    assert {UPLOT / "uPlot.iife.min.js", UPLOT / "uPlot.min.css", UPLOT / "LICENSE"} <= static


class _Assets(HTMLParser):
    """The addresses of the scripts and stylesheets a page loads."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script" and found.get("src"):
            self.urls.append(str(found["src"]))
        if tag == "link" and found.get("rel") == "stylesheet":
            self.urls.append(str(found["href"]))


def test_the_study_page_loads_its_charts_from_its_own_server(client):
    study_id = submit(client, SPEC)
    page = client.get(f"/studies/{study_id}", headers=HTML)
    assert page.status_code == 200
    assets = _Assets(page.text).urls
    assert set(assets) == {
        "/static/vendor/uplot/uPlot.min.css",
        "/static/plots.css",
        "/static/vendor/uplot/uPlot.iife.min.js",
        "/static/plots.js",
    }
    assert all(client.get(url).status_code == 200 for url in assets)
    assert f'data-epochs-url="/studies/{study_id}/epochs"' in page.text
    assert f'data-tuning-url="/studies/{study_id}/tuning"' in page.text
