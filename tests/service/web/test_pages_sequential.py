"""A sequential study's page: its design, where each comparison stands with the numbers that account for
the looks, the seed-trials run against the fixed design, and the monitoring figure; a fixed-seed study's
page has no such section."""

from __future__ import annotations

from tests.service.web.test_pages import HTML, _Elements, _submit
from tests.studies.store.sequential_study import add_sequential_study


def test_the_page_shows_the_design_each_comparisons_decision_the_savings_and_the_monitoring_figure(
    client, app_engine
):
    study_id, monitor = add_sequential_study(app_engine)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    elements = _Elements(page)
    rows = {a["data-method"]: a["data-decision"] for a in elements.having("class", "sequential-comparison")}
    assert rows == {m: c.decision for m, c in monitor.comparisons.items()}
    assert (
        "O&#39;Brien-Fleming, looks at 3/5/7/9 seeds" in page
        or "O'Brien-Fleming, looks at 3/5/7/9 seeds" in page
    )
    assert (
        "<strong>23</strong> of the fixed design&#39;s 27 (4 saved)" in page
        or "<strong>23</strong> of the fixed design's 27 (4 saved)" in page
    )
    assert "Every comparison is decided." in page
    assert elements.having("class", "sequential-monitoring")  # the figure's svg
    sections = client.get(f"/ui/studies/{study_id}/sections").text
    assert 'id="sequential"' in sections  # the polled fragment keeps it current while the study runs


def test_a_fixed_seed_study_has_no_sequential_section(client):
    study_id = _submit(client)
    assert 'id="sequential"' not in client.get(f"/studies/{study_id}", headers=HTML).text
