"""HTTP /studies/{id}/report of a tuned study: its knob importance and optimisation history, in JSON and
markdown, with the tuning figures among the report's figures."""

from __future__ import annotations

import pytest

from tests.service.api.routes.tuning_studies import tuned_study_of


@pytest.fixture
def tuned_study(client, app_engine) -> str:
    return tuned_study_of(client, app_engine)


def test_the_report_of_a_tuned_study_carries_its_importance_history_and_figures(client, tuned_study):
    report = client.get(f"/studies/{tuned_study}/report").json()
    [method] = report["tuning"]["methods"]
    assert method["method"] == "autonorm_s" and method["history"]["best_number"] == 2
    assert {"knob_importance_autonorm_s", "optimisation_history_autonorm_s"} <= {
        f["name"] for f in report["figures"]
    }
    markdown = client.get(f"/studies/{tuned_study}/report", params={"format": "md"}).text
    assert (
        "## Knob importance and optimisation history" in markdown
        and "| knob | fANOVA | PED-ANOVA |" in markdown
    )
