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
