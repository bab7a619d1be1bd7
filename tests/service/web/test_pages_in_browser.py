"""The pages in a real browser (headless Chromium, tests/browser.py) against a live API over a real SQLite
store: a study just POSTed is listed, its progress moves while the test records its trials (as the study
driver would) without the page reloading, the study page follows its trials and draws their curves,
cancel asks for the token, no internal link answers 4xx/5xx and the console stays clean.

The whole stack (Ray, MLflow, a study that trains) is tests/e2e/test_web_pages.py."""

from __future__ import annotations

from tests.service.conftest import API_TOKEN
from tests.service.web.store_rows import PLANNED, finish, record, start

_ROW = 'tr[data-study-id="{}"]'


def test_the_home_page_lists_a_study_just_posted_and_follows_its_progress_without_reloading(
    live_api, browser_page
):
    earlier = live_api.submit(name="earlier")
    page = browser_page.page
    page.goto(f"{live_api.url}/")
    row = page.locator(_ROW.format(earlier))
    assert row.locator('[data-field="name"]').inner_text() == "earlier"
    assert row.get_attribute("data-status") == "queued"
    browser_page.mark_loaded()

    study_id = live_api.submit(name="just posted")  # after the page loaded: its poll must add the row
    new_row = page.locator(_ROW.format(study_id))
    new_row.wait_for()
    assert page.locator("tbody tr").first.get_attribute("data-study-id") == study_id  # newest first
    assert new_row.locator('[data-field="name"]').get_attribute("href") == f"/studies/{study_id}"

    start(live_api.engine, study_id)
    page.wait_for_selector(f'{_ROW.format(study_id)}[data-status="running"]')
    for seed in range(3):
        record(live_api.engine, study_id, "dyt", seed, epochs={1: 0.7}, finished=True)
    page.wait_for_function(f"document.querySelector('{_ROW.format(study_id)} progress').value === 3")
    progress = new_row.locator('[data-field="progress"]').inner_text()
    # A running study with finished trials also says how long is left at its pace (the page's script).
    assert progress.startswith(f"3 / {PLANNED} trials; about ") and progress.endswith(
        "left at the pace so far"
    )
    assert new_row.locator('[data-field="results"]').is_hidden()

    for method in ("dyt", "frozen_ln"):
        for seed in range(3):
            record(live_api.engine, study_id, method, seed, epochs={1: 0.7}, finished=True)
    finish(live_api.engine, study_id)
    page.wait_for_selector(f'{_ROW.format(study_id)}[data-status="succeeded"]')
    assert new_row.locator("progress").evaluate("bar => bar.value === bar.max")
    assert new_row.locator('[data-field="results"]').is_visible()
    assert new_row.locator('[data-field="finished"]').inner_text().endswith(" UTC")
    assert not browser_page.was_reloaded()
    assert browser_page.problems() == []


def test_the_study_page_follows_its_trials_and_draws_their_curves_without_reloading(live_api, browser_page):
    study_id = live_api.submit(name="watched")
    page = browser_page.page
    page.goto(f"{live_api.url}/studies/{study_id}")  # a browser's Accept: the page, not the JSON
    assert page.locator("h1").inner_text().startswith("watched")
    assert page.locator("#no-trials").is_visible()
    browser_page.mark_loaded()

    start(live_api.engine, study_id)
    record(live_api.engine, study_id, "dyt", 0, epochs={1: 0.5})
    page.wait_for_selector('#study-head [data-field="status"].running')
    page.wait_for_selector("tr.trial")
    page.wait_for_selector("svg.epoch-curves polyline.trial-curve", state="attached")  # one epoch: a dot
    assert page.locator('#study-links [data-field="ray-job"]').is_visible()

    record(live_api.engine, study_id, "dyt", 0, epochs={1: 0.5, 2: 0.6, 3: 0.75}, finished=True)
    record(live_api.engine, study_id, "frozen_ln", 0, epochs={1: 0.55})
    page.wait_for_function("document.querySelectorAll('tr.trial').length === 2")
    page.wait_for_function(
        'document.querySelector(\'tr.trial[data-status="succeeded"] [data-field="metric"]\')'
        "?.textContent === '0.75'"
    )
    page.wait_for_function(
        "document.querySelector('svg.epoch-curves').querySelectorAll('polyline.trial-curve').length === 2"
    )
    finish(live_api.engine, study_id, status="failed")
    page.wait_for_selector('#study-head [data-field="status"].failed')
    assert page.locator("#cancel").is_hidden()
    assert page.locator('#study-links [data-field="results"]').is_visible()
    assert not browser_page.was_reloaded()
    assert browser_page.problems() == []


def test_cancel_asks_for_the_api_token_and_sends_it(live_api, browser_page):
    study_id = live_api.submit(name="to cancel")
    page = browser_page.page
    page.goto(f"{live_api.url}/studies/{study_id}")
    form = page.locator("#cancel")
    form.locator('input[name="token"]').fill("not-the-token")
    form.locator("button").click()
    page.wait_for_function(
        "document.getElementById('cancel-message').textContent.startsWith('not cancelled')"
    )
    assert "wrong bearer token" in page.locator("#cancel-message").inner_text()
    assert page.locator('#study-head [data-field="status"]').inner_text() == "queued"

    form.locator('input[name="token"]').fill(API_TOKEN)
    form.locator("button").click()
    page.wait_for_selector('#study-head [data-field="status"].cancelled')
    assert page.locator("#cancel-message").inner_text() == "study cancelled"
    assert form.locator("button").is_disabled()
    assert form.locator('input[name="token"]').input_value() == ""  # the token is not left in the page
    # The refused attempt is the only failed load the page made.
    assert browser_page.problems(allow=lambda message: "401" in message) == []


def test_no_internal_link_of_the_pages_answers_an_error(live_api, browser_page):
    study_id = live_api.submit(name="linked")
    start(live_api.engine, study_id)
    for method in ("dyt", "frozen_ln"):
        for seed in range(3):
            record(live_api.engine, study_id, method, seed, epochs={1: 0.6, 2: 0.7}, finished=True)
    finish(live_api.engine, study_id)
    running = live_api.submit(name="still queued")
    page = browser_page.page
    checked = 0
    for path in ("/", f"/studies/{study_id}", f"/studies/{running}", "/catalog"):
        page.goto(f"{live_api.url}{path}")
        links = browser_page.internal_links()
        assert links, path
        assert browser_page.broken_links() == {}, path
        checked += len(links)
    assert checked > 20  # the catalog links the reports stored in the source tree
    assert browser_page.problems() == []
