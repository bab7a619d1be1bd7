"""The search, the tags and deleting in a real browser (headless Chromium, tests/browser.py) against a live
API: a searched home page adds, as it polls, only the new studies its search finds, with their tag chips;
the study page deletes an ended study once given the token and its id again."""

from __future__ import annotations

import httpx

from tests.service.conftest import API_TOKEN, AUTH
from tests.service.web.store_rows import finish, record, start

_ROW = 'tr[data-study-id="{}"]'


def _tag(live_api, study_id: str, *tags: str) -> None:
    response = httpx.put(f"{live_api.url}/studies/{study_id}/tags", json={"tags": list(tags)}, headers=AUTH)
    assert response.status_code == 200, response.text


def test_a_searched_home_page_adds_only_the_new_studies_its_search_finds(live_api, browser_page):
    earlier = live_api.submit(name="earlier")
    _tag(live_api, earlier, "paper")
    page = browser_page.page
    page.goto(f"{live_api.url}/?tag=paper")
    assert page.locator(_ROW.format(earlier)).locator(".tag").all_inner_texts() == ["paper"]
    browser_page.mark_loaded()

    untagged = live_api.submit(name="not in the search")
    tagged = live_api.submit(name="in the search")
    _tag(live_api, tagged, "v2", "paper")
    row = page.locator(_ROW.format(tagged))
    row.wait_for()
    assert row.locator(".tag").all_inner_texts() == ["paper", "v2"]  # filled by the page's script
    assert row.locator(".tag").first.get_attribute("href") == "/?tag=paper"
    assert page.locator(_ROW.format(untagged)).count() == 0
    assert not browser_page.was_reloaded()
    assert browser_page.problems() == []


def test_the_study_page_deletes_an_ended_study_given_the_token_and_its_id(live_api, browser_page):
    study_id = live_api.submit(name="to delete")
    start(live_api.engine, study_id)
    record(live_api.engine, study_id, "dyt", 0, epochs={1: 0.7}, finished=True)
    finish(live_api.engine, study_id)
    page = browser_page.page
    page.goto(f"{live_api.url}/studies/{study_id}")
    form = page.locator("#delete")
    assert form.is_visible() and page.locator("#cancel").is_hidden()

    form.locator('input[name="token"]').fill(API_TOKEN)
    form.locator('input[name="confirm"]').fill("not-its-id")
    form.locator("button").click()
    page.wait_for_function("document.getElementById('delete-message').textContent.startsWith('not deleted')")
    assert "repeat its id as confirm" in page.locator("#delete-message").inner_text()
    assert httpx.get(f"{live_api.url}/studies/{study_id}").status_code == 200

    form.locator('input[name="confirm"]').fill(study_id)
    form.locator("button").click()
    page.wait_for_function("document.getElementById('delete-message').textContent.startsWith('deleted')")
    assert "deleted with its 1 trial(s)" in page.locator("#delete-message").inner_text()
    assert form.locator("button").is_disabled()
    assert form.locator('input[name="token"]').input_value() == ""  # the token is not left in the page
    assert httpx.get(f"{live_api.url}/studies/{study_id}").status_code == 404
    # The refused attempt is the only failed load the page made.
    assert browser_page.problems(allow=lambda message: "422" in message) == []
