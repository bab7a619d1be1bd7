"""A study Ray does not take says so: the home page and the study page show its failed submissions in Ray's
words and when it is tried again, in process (TestClient) and in a real browser that polls the API."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from html import unescape

from studies.store import record_submit_failure, session_scope, set_study_status
from tests.factories import submit
from tests.service.web.store_rows import SPEC, start

HTML = {"Accept": "text/html"}
NO_AGENT = (
    "Ray refused the job for study x: the Ray job server did not answer (RuntimeError: Request failed with "
    "status code 500: No available agent to submit job, please try again later..)"
)
_ROW = 'tr[data-study-id="{}"]'


def _fail_submission(engine, study_id: str, *, attempt: int = 1, error: str = NO_AGENT, retry: bool = True):
    retry_at = datetime.now(timezone.utc) + timedelta(seconds=40) if retry else None
    with session_scope(engine) as session:
        record_submit_failure(session, study_id=study_id, attempt=attempt, error=error, retry_at=retry_at)


def test_the_home_page_says_why_a_queued_study_waits(client, app_engine):
    study_id = submit(client, {**SPEC, "name": "stuck"})
    _fail_submission(app_engine, study_id, error="first <refusal>")
    _fail_submission(app_engine, study_id)
    page = client.get("/", headers=HTML).text
    row = page[page.index(f'data-study-id="{study_id}"') :]
    warning = row[row.index('data-field="submit-failure"') : row.index("</p>")]
    assert "hidden" not in warning.split(">")[0]
    assert f"Ray did not take its driver (2 failed submissions): {NO_AGENT}" in unescape(warning)
    assert "Next try" in warning and 'data-field="submit-retry"' in warning


def test_the_study_page_lists_every_failed_submission_and_keeps_them_once_ray_took_it(client, app_engine):
    study_id = submit(client, {**SPEC, "name": "stuck"})
    _fail_submission(app_engine, study_id, error="job server <restarting>")
    _fail_submission(app_engine, study_id)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert page.count('class="submit-failure-row"') == 2
    assert "job server &lt;restarting&gt;" in page  # Ray's words, escaped
    assert f"Ray did not take its driver (2 failed submissions): {NO_AGENT}" in unescape(page)

    start(app_engine, study_id)  # then Ray took attempt 1
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    head_warning = page[page.index('data-field="submit-failure"') - 40 :]
    assert 'data-field="submit-failure" hidden' in head_warning[:120]  # nothing keeps it waiting now
    assert page.count('class="submit-failure-row"') == 2  # the history stays


def test_a_study_that_failed_for_it_shows_rays_last_words_and_no_next_try(client, app_engine):
    study_id = submit(client, {**SPEC, "name": "refused"})
    _fail_submission(app_engine, study_id, retry=False)
    with session_scope(app_engine) as session:
        set_study_status(
            session, study_id=study_id, status="failed", error=f"Ray did not take it: {NO_AGENT}"
        )
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert "not tried again" in page
    assert 'class="error" data-field="error">' in page


def test_the_json_study_lists_its_failed_submissions(client, app_engine):
    study_id = submit(client, {**SPEC, "name": "stuck"})
    _fail_submission(app_engine, study_id)
    [failure] = client.get(f"/studies/{study_id}").json()["submit_failures"]
    assert (failure["number"], failure["attempt"], failure["error"]) == (1, 1, NO_AGENT)
    assert failure["retry_at"] is not None and failure["failed_at"] is not None


def test_an_open_home_page_shows_a_failed_submission_as_its_poll_brings_it(live_api, browser_page):
    study_id = live_api.submit(name="waits")
    page = browser_page.page
    page.goto(f"{live_api.url}/")
    warning = page.locator(f'{_ROW.format(study_id)} [data-field="submit-failure"]')
    assert warning.is_hidden()
    browser_page.mark_loaded()

    _fail_submission(live_api.engine, study_id)  # as the reconcile loop records it
    warning.wait_for(state="visible")
    assert warning.inner_text().startswith(f"Ray did not take its driver (1 failed submission): {NO_AGENT}")
    assert "Next try" in warning.inner_text() and warning.inner_text().endswith("UTC.")

    start(live_api.engine, study_id)  # Ray took it: the warning goes
    warning.wait_for(state="hidden")
    assert not browser_page.was_reloaded()
    assert browser_page.problems() == []
