"""GET /results/{dataset}: the JSON gains a `tuning` key and the HTML page a knob-importance section, from
each study's tune trials (knob importance, optimisation history) or a sweep's grid trials (importance and
the response to each knob); a study that neither tunes nor sweeps adds nothing."""

from __future__ import annotations

import pytest

from tests.factories import submit
from tests.service.api.routes.tuning_studies import SWEEP, TUNED, finals, record, tuned_study_of


@pytest.fixture
def tuned_study(client, app_engine) -> str:
    return tuned_study_of(client, app_engine)


def test_the_json_results_carry_each_tuned_methods_importance_and_history(client, tuned_study):
    payload = client.get("/results/digits").json()
    [tuning] = payload["tuning"]
    assert (tuning["study_id"], tuning["phase"], tuning["objective"]) == (tuned_study, "tune", "val_accuracy")
    [method] = tuning["methods"]  # frozen_ln is not tuned
    assert method["method"] == "autonorm_s"
    importance = method["importance"]
    assert importance["trials"] == 7 and importance["reason"] is None
    fanova = next(e for e in importance["evaluators"] if e["evaluator"] == "fanova")
    assert {k["knob"] for k in fanova["knobs"]} == {"eps_h", "t_freeze"}
    assert "forest seeds" in fanova["spread_over"]
    history = method["history"]
    assert [p["number"] for p in history["points"]] == list(range(8))
    assert history["points"][5]["value"] is None and history["points"][5]["status"] == "failed"
    assert history["points"][0]["epochs"] == 4
    assert history["best_number"] == 2  # eps_h 0.09: the closest to 0.1


def test_the_html_page_shows_the_importance_table_and_the_history_figure(client, tuned_study):
    page = client.get("/results/digits", params={"format": "html"}).text
    assert page.index("<table") < page.index("Knob importance and optimisation history")
    assert f'id="{tuned_study}_optimisation_history_autonorm_s"' in page
    assert f'id="{tuned_study}_knob_importance_autonorm_s"' in page
    assert "PED-ANOVA" in page


def test_a_sweep_carries_its_response_to_each_knob(client, app_engine):
    study_id = submit(client, SWEEP)
    for eps_h in (0.05, 0.1, 0.2):
        for t_freeze in (1, 2):
            for seed in (0, 1):
                record(
                    app_engine,
                    study_id,
                    f"grid/{eps_h}/{t_freeze}/{seed}",
                    phase="grid",
                    method="autonorm_s",
                    seed=seed,
                    knobs={"eps_h": eps_h, "t_freeze": t_freeze},
                    value=0.9 - (eps_h - 0.1) ** 2 + seed / 100,
                )
    [tuning] = client.get("/results/digits").json()["tuning"]
    [method] = tuning["methods"]
    assert method["history"] is None
    assert [r["knob"] for r in method["response"]] == ["eps_h", "t_freeze"]
    assert [p["objective"]["n"] for p in method["response"][0]["points"]] == [2, 2, 2]
    page = client.get("/results/digits", params={"format": "html"}).text
    assert f'id="{study_id}_knob_response_autonorm_s"' in page


def test_a_study_that_neither_tunes_nor_sweeps_adds_no_tuning(client, app_engine):
    spec = {**TUNED, "name": "plain", "method_search": {"autonorm_s": {"t_freeze": 2}}}
    study_id = submit(client, spec)
    finals(app_engine, study_id, ["autonorm_s", "frozen_ln"])
    assert client.get("/results/digits").json()["tuning"] == []
    assert "Knob importance" not in client.get("/results/digits", params={"format": "html"}).text
