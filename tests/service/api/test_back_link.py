"""The results table and a report, served as HTML, lead back to the study list (and a report to its
study's page); their renderings for files and MLflow stay standalone."""

from __future__ import annotations

from service.api.back_link import with_back_link
from tests.factories import submit
from tests.service.web.store_rows import SPEC, record, start

HTML = {"Accept": "text/html"}


def _finished_trials(client, engine) -> str:
    study_id = submit(client, SPEC)
    start(engine, study_id)
    for method in SPEC["methods"]:
        for seed in SPEC["seeds"]:
            record(engine, study_id, method, seed, epochs={1: 0.8 + 0.01 * seed}, finished=True)
    return study_id


def test_a_served_results_page_links_back_to_the_studies_and_the_catalog(client, app_engine):
    _finished_trials(client, app_engine)
    page = client.get("/results/digits?format=html").text
    nav = page.split("<body>", 1)[1].split("</nav>", 1)[0]
    assert '<a href="/">All studies</a>' in nav and '<a href="/catalog">Catalog</a>' in nav


def test_a_served_report_also_links_to_its_studys_page(client, app_engine):
    study_id = _finished_trials(client, app_engine)
    page = client.get(f"/studies/{study_id}/report?format=html").text
    assert f'<a href="/studies/{study_id}">This study</a>' in page.split("</nav>", 1)[0]


def test_a_document_without_a_body_tag_gets_the_links_first():
    assert with_back_link("<p>x</p>").startswith('<nav class="back"')
