"""One catalog claim end to end: its smoke study POSTed to the real stack (Ray, MLflow, SQLite), run to the
end, and its report read back with the claim, the paper's statement and a verdict on the measured data.

The claim is Transforming Rank's Post-Norm rank collapse: a grid of 2 placements x 4 seeds, one epoch
each (the claim is about the epoch-0 measurements), the cheapest study in the catalog."""

from __future__ import annotations

import time

import pytest

from studies.catalog import spec_path

pytestmark = pytest.mark.slow

CLAIM = "rank_post_norm_collapse"
TERMINAL = {"succeeded", "failed", "cancelled"}


@pytest.fixture(scope="module")
def finished_smoke_study(running_service) -> dict:
    with running_service.client() as client:
        created = client.post(
            "/studies",
            content=spec_path(CLAIM, "smoke").read_text(),
            headers={**running_service.auth(), "Content-Type": "application/yaml"},
        )
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            study = client.get(f"/studies/{study_id}").json()
            if study["status"] in TERMINAL:
                break
            time.sleep(2)
        else:
            pytest.fail(f"smoke study still {study['status']} after 10 min:\n{running_service.log_tail()}")
    assert study["status"] == "succeeded", f"{study.get('error')}\n{running_service.log_tail()}"
    return study


def test_the_report_judges_the_claim_on_the_epoch_zero_ranks_of_every_trial(
    running_service, finished_smoke_study
):
    with running_service.client() as client:
        response = client.get(f"/studies/{finished_smoke_study['id']}/report")
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["claim"]["id"] == CLAIM and report["claim"]["paper"] == "transforming_rank"
    assert report["verdict"] in {"supported", "contradicted", "inconclusive"}
    findings = report["result"]["findings"]
    assert [f["expected"] for f in findings[:3]] == ["< 0.1", "> 0.2", "> 0"]
    assert all(
        f["n"] == 4 and f["measured"] is not None for f in findings[:3]
    )  # every seed reported its ranks
    post, pre = findings[0]["measured"], findings[1]["measured"]
    assert 0.0 < post < pre <= 1.0  # the measured ranks go the claim's way, whatever the power
    assert report["provenance"]["seeds"] == [0, 1, 2, 3]


def test_the_markdown_and_html_reports_show_the_verdict_section(running_service, finished_smoke_study):
    with running_service.client() as client:
        markdown = client.get(f"/studies/{finished_smoke_study['id']}/report", params={"format": "md"}).text
        page = client.get(f"/studies/{finished_smoke_study['id']}/report", params={"format": "html"}).text
    assert "**Verdict: " in markdown and "## Findings (check `rank_vs_depth`)" in markdown
    assert 'class="verdict ' in page and "<svg" in page
