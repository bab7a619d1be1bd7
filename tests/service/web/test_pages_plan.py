"""A study's page puts its plan before launch beside what it spent: trials, final seeds per method, wall
time and GPU-hours; a sequential study's plan gives its maximum and its expected trials."""

from __future__ import annotations

from tests.factories import run_to_the_end, submit
from tests.service.web.test_pages import HTML, _Elements
from tests.studies.store.sequential_study import add_sequential_study


def _rows(page: str) -> dict[str, tuple[str, str]]:
    # The table's cells in order: what, planned, spent.
    import re

    cells = re.findall(
        r'<tr class="plan-row"><td>(.*?)</td><td class="number">(.*?)</td><td class="number">(.*?)</td></tr>',
        page,
    )
    return {what: (planned, spent) for what, planned, spent in cells}


def test_a_finished_studys_page_shows_its_planned_trials_beside_the_trials_it_ran(client, app_engine):
    study_id = submit(client)  # the quick spec: 6 tune trials, 3 methods x 3 final seeds
    run_to_the_end(app_engine, study_id, {"autonorm_s": [0.9] * 3, "frozen_ln": [0.91] * 3, "dyt": [0.9] * 3})
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert _Elements(page).having("id", "plan-beside-spend")
    rows = _rows(page)
    assert rows["trials (one per seed)"] == ("15", "9 ended, 0 running")  # 6 tune trials were never stored
    assert rows["final seeds per method"][1] == "autonorm_s 3, frozen_ln 3, dyt 3"
    assert rows["wall time"][0].endswith("min") or rows["wall time"][0] == "no prediction"


def test_a_sequential_studys_plan_gives_its_maximum_and_expected_trials(client, app_engine):
    study_id, _ = add_sequential_study(app_engine)
    rows = _rows(client.get(f"/studies/{study_id}", headers=HTML).text)
    planned, spent = rows["trials (one per seed)"]
    assert planned.startswith("27 at most, ") and planned.endswith(" expected")
    assert spent == "23 ended, 0 running"


def test_a_gpu_studys_page_shows_the_trial_plan_its_measurement_chose(client, app_engine):
    from studies.store import session_scope, set_study_trial_plan

    study_id = submit(client)
    candidates = [
        {"seeds_per_trial": 1, "compile": "none", "trials_per_gpu": 1, "samples_per_s": 6200.0,
         "overhead_s": 0.5, "note": "", "effective_samples_per_s": 6190.0, "x_baseline": 1.0, "chosen": False},
        {"seeds_per_trial": 8, "compile": "reduce-overhead", "trials_per_gpu": 8, "samples_per_s": 95416.0,
         "overhead_s": 41.2, "note": "", "effective_samples_per_s": 88000.0, "x_baseline": 14.22, "chosen": True},
        {"seeds_per_trial": 4, "compile": "reduce-overhead", "trials_per_gpu": 8, "samples_per_s": None,
         "overhead_s": 0.0, "note": "not measured: the 60 s bound ran out", "chosen": False},
    ]  # fmt: skip
    plan = {
        "describe": "1 CPU and 0.125 GPU per trial (auto); 8 seed(s) per final/grid trial; compile reduce-overhead",
        "compile": "reduce-overhead",
        "throughput": {
            "summary": "8 seed(s) per trial, compile reduce-overhead, 8 trial(s) per GPU: 88,000 samples/s per GPU",
            "source": "cached",
            "gpu": "NVIDIA H200",
            "measured_at": "2026-12-08T10:00:00+00:00",
            "probed_method": "autonorm_s",
            "rule": "fastest samples/s per GPU",
            "candidates": candidates,
        },
    }
    with session_scope(app_engine) as session:
        set_study_trial_plan(session, study_id=study_id, plan=plan)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert _Elements(page).having("id", "throughput-candidates")
    assert "compile reduce-overhead" in page and "measured by an earlier study of the same shape" in page
    assert "NVIDIA H200" in page and "95,416" in page and "14.22x" in page and "(chosen)" in page
    assert "not measured: the 60 s bound ran out" in page


def test_a_study_without_a_measurement_shows_its_plan_and_no_candidates(client, app_engine):
    from studies.store import session_scope, set_study_trial_plan

    study_id = submit(client)
    assert 'id="trial-plan"' not in client.get(f"/studies/{study_id}", headers=HTML).text  # not planned yet
    with session_scope(app_engine) as session:
        set_study_trial_plan(
            session, study_id=study_id, plan={"describe": "1 CPU and 0 GPU per trial", "throughput": None}
        )
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert "1 CPU and 0 GPU per trial" in page and 'id="throughput-candidates"' not in page
