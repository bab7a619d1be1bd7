"""The pages in process (TestClient): a browser gets HTML where a JSON client keeps the API's answer, the
home and study pages show what the store holds with their links, user text is escaped, and the pages stay
out of the API's OpenAPI document."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from service.api.mlflow_links import mlflow_ui_url
from service.api.routes.schemas import StudyOut
from studies.store import get_study, session_scope, set_study_status
from tests.factories import submit
from tests.service.web.store_rows import EXPERIMENT, PLANNED, SPEC, finish, record, start, trial_key

CHROME = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
HTML = {"Accept": CHROME}


def _submit(client, **changes) -> str:
    return submit(client, {**SPEC, **changes})


class _Elements(HTMLParser):
    """Every start tag with its attributes, to find elements by attribute without a DOM."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def having(self, name: str, value: str | None = None) -> list[dict[str, str | None]]:
        return [a for _, a in self.tags if name in a and (value is None or a[name] == value)]


def _link(page: str, field: str) -> str | None:
    """The address of the first link with data-field `field`; None where it is hidden (no address)."""
    links = _Elements(page).having("data-field", field)
    assert links, f"no element with data-field={field!r}"
    return links[0].get("href")


# ------------------------------------------------------------------------------- content negotiation


@pytest.mark.parametrize(
    "accept",
    [None, "*/*", "application/json", "application/json, text/html", "text/html;q=0.5, application/json"],
    ids=["no-accept", "any", "json", "json-and-html-tied", "json-preferred"],
)
def test_a_json_client_gets_exactly_the_json_study_it_got_before_the_pages(
    client, app_engine, settings, accept
):
    study_id = _submit(client)
    headers = {} if accept is None else {"Accept": accept}
    request = client.build_request("GET", f"/studies/{study_id}", headers=headers)
    if accept is None:
        del request.headers["Accept"]  # httpx sends */* unless told not to
    response = client.send(request)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    with session_scope(app_engine, readonly=True) as session:
        expected = StudyOut.from_view(
            get_study(session, study_id=study_id), mlflow_tracking_uri=settings.mlflow_tracking_uri
        )
    assert response.json() == expected.model_dump(mode="json")


@pytest.mark.parametrize("accept", [CHROME, FIREFOX, "text/html"], ids=["chrome", "firefox", "html"])
def test_a_browser_gets_the_study_page(client, accept):
    study_id = _submit(client, name="first look")
    response = client.get(f"/studies/{study_id}", headers={"Accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["vary"] == "Accept"  # a cache must not serve the page to a JSON client
    assert "<h1>first look" in response.text


def test_an_unknown_study_is_a_page_for_a_browser_and_the_json_404_for_anyone_else(client):
    page = client.get("/studies/no-such-study", headers=HTML)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "No study has the id" in page.text
    api = client.get("/studies/no-such-study")
    assert api.status_code == 404
    assert "detail" in api.json()


def test_the_other_json_routes_under_studies_answer_a_browser_with_json_as_before(client):
    study_id = _submit(client)
    for path in ("/studies", f"/studies/{study_id}/trials"):
        response = client.get(path, headers=HTML)
        assert response.headers["content-type"] == "application/json", path


def test_the_pages_are_not_part_of_the_api_document(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert "/" not in paths
    assert not [p for p in paths if p.startswith(("/catalog", "/ui/"))]
    assert "/studies/{study_id}" in paths  # the JSON route of the shared path is documented as before


def test_the_pages_answer_only_hosts_the_api_serves(client):
    response = client.get("/", headers={**HTML, "Host": "evil.example"})
    assert response.status_code == 400  # service.api.host_check: no page through DNS rebinding either


# ------------------------------------------------------------------------------------------ home page


def test_the_home_page_lists_studies_newest_first_with_status_progress_dataset_and_methods(
    client, app_engine
):
    older = _submit(client, name="older")
    newer = _submit(client, name="newer", methods=["dyt", "adanorm"])
    start(app_engine, older)
    record(app_engine, older, "dyt", 0, epochs={1: 0.6}, finished=True)
    record(app_engine, older, "dyt", 1, epochs={1: 0.6})
    page = client.get("/", headers=HTML).text
    rows = _Elements(page).having("data-study-id")
    assert [r["data-study-id"] for r in rows if r["data-study-id"]] == [newer, older]
    assert [r["data-status"] for r in rows if r["data-study-id"]] == ["queued", "running"]
    assert f"1 / {PLANNED} trials, 1 running" in page
    assert f'<progress data-field="bar" max="{PLANNED}" value="1">' in page
    assert "dyt, adanorm" in page
    assert page.count('<td data-field="dataset">digits</td>') == 2


def test_a_study_row_links_its_page_report_results_and_mlflow_once_they_exist(client, app_engine, settings):
    study_id = _submit(client)
    page = client.get("/", headers=HTML).text
    assert _link(page, "name") == f"/studies/{study_id}"
    assert _link(page, "report") == f"/studies/{study_id}/report?format=html"
    assert _link(page, "results") is None  # no results table before the study succeeded
    assert _link(page, "mlflow") is None  # nor an MLflow experiment before the driver made it
    start(app_engine, study_id)
    record(app_engine, study_id, "dyt", 0, epochs={1: 0.7}, finished=True)
    finish(app_engine, study_id)
    page = client.get("/", headers=HTML).text
    assert _link(page, "results") == f"/results/digits?study={study_id}&format=html"
    assert _link(page, "mlflow") == mlflow_ui_url(settings.mlflow_tracking_uri, experiment_id=EXPERIMENT)
    assert client.get(_link(page, "results") or "").status_code == 200


def test_the_home_page_with_no_studies_says_so(client):
    page = client.get("/", headers=HTML).text
    assert re.search(r'<p id="no-studies" class="warning">\s*No studies yet', page)


def test_the_home_page_is_html_whatever_the_client_asks(client):
    assert client.get("/").headers["content-type"].startswith("text/html")


# ----------------------------------------------------------------------------------------- study page


def test_the_study_page_shows_every_trial_with_its_status_and_final_metric(client, app_engine):
    study_id = _submit(client)
    start(app_engine, study_id)
    record(app_engine, study_id, "frozen_ln", 0, epochs={1: 0.61, 2: 0.8125}, finished=True)
    record(app_engine, study_id, "dyt", 0, epochs={1: 0.55})
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    rows = {r["data-trial-key"]: r["data-status"] for r in _Elements(page).having("data-trial-key")}
    assert rows == {
        trial_key(study_id, "frozen_ln", 0): "succeeded",
        trial_key(study_id, "dyt", 0): "running",
    }
    assert '<td class="number" data-field="metric">0.8125</td>' in page
    assert "<code>grid/frozen_ln/seed0</code>" in page  # the key without the study id in front
    assert f"2 / {PLANNED} trials" not in page and f"1 / {PLANNED} trials, 1 running" in page


def test_the_study_page_draws_each_trials_per_epoch_curves(client, app_engine):
    study_id = _submit(client)
    start(app_engine, study_id)
    record(app_engine, study_id, "frozen_ln", 0, epochs={1: 0.6, 2: 0.7, 3: 0.8}, finished=True)
    record(app_engine, study_id, "dyt", 0, epochs={1: 0.5, 2: 0.65})
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    figures = re.findall(r"<svg .*?</svg>", page, flags=re.DOTALL)
    titles = [ET.fromstring(f).get("aria-label") for f in figures]
    assert titles == ["grid phase: val_accuracy per epoch", "grid phase: train_loss per epoch"]
    curves = [e for e in ET.fromstring(figures[0]).iter() if e.get("class") == "trial-curve"]
    assert sorted(c.get("data-trial") for c in curves) == ["grid/dyt/seed0", "grid/frozen_ln/seed0"]
    running = next(c for c in curves if c.get("data-trial") == "grid/dyt/seed0")
    assert running.get("stroke-dasharray")  # still training: dotted


def test_the_study_page_links_results_report_mlflow_and_the_ray_job(client, app_engine, settings):
    study_id = _submit(client)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert _link(page, "results") is None
    assert _link(page, "ray-job") is None
    assert "Not submitted to Ray yet." in page
    start(app_engine, study_id)
    record(app_engine, study_id, "dyt", 0, epochs={1: 0.7}, finished=True)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    job = f"raysubmit_{study_id[:8]}"
    assert _link(page, "ray-job") == f"{settings.ray_dashboard_url}/#/jobs/{job}"
    assert _link(page, "results") == f"/results/digits?study={study_id}&format=html"
    assert _link(page, "report") == f"/studies/{study_id}/report?format=html"
    assert _link(page, "mlflow") == mlflow_ui_url(settings.mlflow_tracking_uri, experiment_id=EXPERIMENT)
    run = mlflow_ui_url(settings.mlflow_tracking_uri, experiment_id=EXPERIMENT, run_id="run-dyt-0")
    assert f'<a href="{run}">MLflow run</a>' in page
    history = f"/studies/{study_id}/trials/{trial_key(study_id, 'dyt', 0)}/history"
    assert f'href="{history}"' in page
    assert client.get(history).json()["epochs"][0]["metrics"]["val_accuracy"] == 0.7


def test_the_cancel_form_shows_only_while_the_study_can_be_cancelled(client, app_engine):
    study_id = _submit(client)
    assert '<form class="cancel" id="cancel">' in client.get(f"/studies/{study_id}", headers=HTML).text
    finish(app_engine, study_id, status="cancelled")
    assert '<form class="cancel" id="cancel" hidden>' in client.get(f"/studies/{study_id}", headers=HTML).text


def test_the_sections_fragment_is_the_study_page_below_its_head(client, app_engine):
    study_id = _submit(client)
    start(app_engine, study_id)
    record(app_engine, study_id, "dyt", 0, epochs={1: 0.7})
    fragment = client.get(f"/ui/studies/{study_id}/sections").text
    assert "<html" not in fragment
    assert trial_key(study_id, "dyt", 0) in fragment
    assert 'class="trial-curve"' in fragment
    assert client.get("/ui/studies/nope/sections").status_code == 404


# ----------------------------------------------------------------------------------------- escaping


def test_every_text_a_user_or_a_trial_wrote_is_escaped_on_every_page(client, app_engine):
    hostile = "<script>alert('name')</script>"
    study_id = _submit(client, name=hostile)
    start(app_engine, study_id)
    record(app_engine, study_id, "dyt", 0, epochs={1: 0.5}, name='"><img src=x onerror=alert(1)>')
    with session_scope(app_engine) as session:
        set_study_status(
            session, study_id=study_id, status="failed", error="<b onmouseover=alert(2)>boom</b>"
        )
    pages = [
        client.get("/", headers=HTML).text,
        client.get(f"/studies/{study_id}", headers=HTML).text,
        client.get(f"/ui/studies/{study_id}/sections").text,
    ]
    for page in pages:
        assert "<script>alert" not in page
        assert "<img src=x" not in page
        assert "<b onmouseover" not in page
    assert "&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;" in pages[0]
    assert "&lt;b onmouseover=alert(2)&gt;boom&lt;/b&gt;" in pages[1]
