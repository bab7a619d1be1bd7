"""The pages on the whole stack, in a real browser: a study POSTed to `normlab serve` shows on the home page,
whose progress bar moves as Ray trains its trials, with no reload; its page then holds every trial with its
final metric and per-epoch curves, links that resolve (MLflow's UI among them) and a clean console."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import MLFLOW_CREDENTIALS
from tests.e2e.specs import GRID_METHODS, GRID_SEEDS, two_method_grid

pytestmark = pytest.mark.slow

TRIALS = len(GRID_METHODS) * len(GRID_SEEDS)


def test_a_browser_follows_a_study_from_the_home_page_to_its_curves(running_service, browser_page):
    page = browser_page.page
    page.set_default_timeout(600_000)  # the waits below follow real training on 2 cores
    with running_service.client() as client:
        response = client.post(
            "/studies", json=two_method_grid("web pages", epochs=4), headers=running_service.auth()
        )
    assert response.status_code == 201, response.text
    study_id = response.json()["id"]

    page.goto(f"{running_service.api_url}/")
    row = f'tr[data-study-id="{study_id}"]'
    assert page.locator(f"{row} [data-field=name]").inner_text() == "web pages"
    browser_page.mark_loaded()
    # The bar moves while the study runs: some trials done, not all, seen by the page's own polling.
    page.wait_for_function(
        f"""() => {{
            const bar = document.querySelector('{row} progress');
            return bar.value > 0 || document.querySelector('{row}').dataset.status !== 'queued';
        }}"""
    )
    page.wait_for_function(f"document.querySelector('{row} progress').value >= 1")
    page.wait_for_selector(f'{row}[data-status="succeeded"]')
    assert page.locator(f"{row} [data-field=progress]").inner_text() == f"{TRIALS} / {TRIALS} trials"
    assert not browser_page.was_reloaded(), "the home page reloaded"

    page.locator(f"{row} [data-field=name]").click()
    page.wait_for_url(f"**/studies/{study_id}")
    assert page.locator("tr.trial[data-status=succeeded]").count() == TRIALS
    metrics = page.locator("tr.trial [data-field=metric]").all_inner_texts()
    assert all(float(value) > 0 for value in metrics), metrics
    curves = page.locator("svg.epoch-curves").first.locator("polyline.trial-curve")
    assert curves.count() == TRIALS
    assert browser_page.broken_links() == {}
    mlflow = page.locator("#study-links [data-field=mlflow]").get_attribute("href") or ""
    assert mlflow.startswith(running_service.mlflow_url), mlflow
    # MLflow's UI asks a browser to sign in, and answers once it has (the stack's MLflow requires it).
    ui = mlflow.split("#", 1)[0]
    assert httpx.get(ui, timeout=30).status_code == 401
    signed_in = (
        MLFLOW_CREDENTIALS["MLFLOW_TRACKING_USERNAME"],
        MLFLOW_CREDENTIALS["MLFLOW_TRACKING_PASSWORD"],
    )
    assert httpx.get(ui, auth=signed_in, timeout=30).status_code == 200
    ray_job = page.locator("#study-links [data-field=ray-job]").get_attribute("href") or ""
    assert ray_job.startswith(f"{running_service.ray_dashboard_url}/#/jobs/"), ray_job

    page.goto(f"{running_service.api_url}/catalog")
    assert page.locator("tr.claim").count() > 0
    assert browser_page.problems() == []
