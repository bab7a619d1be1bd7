"""The phase beside a running study's progress: what it runs now ("tuning", "final seeds", "grid", or a
sequential design's "look 3 of 4"), as the JSON API's `phase` (which the pages' scripts poll) and as the
pages print it; nothing before the study starts or once it ended."""

from __future__ import annotations

import re

from tests.factories import add_trial, start_study, submit
from tests.service.web.store_rows import SPEC, finish, record, start
from tests.service.web.test_pages import HTML
from tests.studies.store.sequential_study import add_sequential_study

_PHASE = re.compile(r'<span class="phase" data-field="phase"[^>]*?( hidden)?>([^<]*)</span>')


def _json_phase(client, study_id: str) -> str | None:
    response = client.get(f"/studies/{study_id}")
    assert response.status_code == 200
    return response.json()["phase"]


def _listed_phase(client, study_id: str) -> str | None:
    (study,) = [s for s in client.get("/studies").json() if s["id"] == study_id]
    return study["phase"]


def _page_phase(client, path: str) -> str | None:
    """The phase the page prints beside the (first) progress; None where it is hidden."""
    found = _PHASE.search(client.get(path, headers=HTML).text)
    assert found, f"{path} has no phase element"
    hidden, text = found.groups()
    assert bool(hidden) == (text == ""), found.group(0)  # shown exactly when it says something
    return text or None


def test_a_compare_study_is_tuning_until_every_tuning_trial_ended_then_runs_its_final_seeds(
    client, app_engine
):
    study_id = submit(client)  # QUICK_SPEC_YAML: 3 methods x 2 tuning samples, then 3 methods x 3 seeds
    assert _json_phase(client, study_id) is None  # queued: nothing runs yet
    assert _page_phase(client, f"/studies/{study_id}") is None

    start_study(app_engine, study_id)
    assert _json_phase(client, study_id) == "tuning"
    for n in range(5):
        add_trial(app_engine, study_id, f"{study_id}/tune/t{n}", phase="tune", seed=None, metric_value=0.5)
    add_trial(app_engine, study_id, f"{study_id}/tune/t5", phase="tune", seed=None, status="running")
    assert _json_phase(client, study_id) == "tuning"  # one tuning trial still runs
    assert _page_phase(client, f"/studies/{study_id}") == "tuning"

    add_trial(app_engine, study_id, f"{study_id}/tune/t5", phase="tune", seed=None, status="failed")
    assert _json_phase(client, study_id) == "final seeds"  # every tuning trial ended, whatever its outcome
    assert _page_phase(client, f"/studies/{study_id}") == "final seeds"
    assert _listed_phase(client, study_id) == "final seeds"


def test_a_grid_study_runs_its_grid_and_the_home_and_study_pages_say_so_until_it_ends(client, app_engine):
    study_id = submit(client, SPEC)
    start(app_engine, study_id)
    record(app_engine, study_id, "dyt", 0, epochs={1: 0.7}, finished=True)
    assert _json_phase(client, study_id) == "grid"
    assert _listed_phase(client, study_id) == "grid"
    assert _page_phase(client, f"/studies/{study_id}") == "grid"
    assert _page_phase(client, "/") == "grid"

    finish(app_engine, study_id)
    assert _json_phase(client, study_id) is None  # ended: its status says the rest
    assert _page_phase(client, f"/studies/{study_id}") is None
    assert _page_phase(client, "/") is None


def test_a_sequential_study_names_the_look_its_seeds_train_for(client, app_engine):
    study_id, _ = add_sequential_study(app_engine, looks=2)  # looks at 3, 5, 7 and 9 seeds: 2 taken
    start_study(app_engine, study_id)
    assert _json_phase(client, study_id) == "look 3 of 4"
    assert _page_phase(client, f"/studies/{study_id}") == "look 3 of 4"
    # The listing reads no looks: the phase it gives is the seeds' phase alone.
    assert _listed_phase(client, study_id) == "final seeds"


def test_a_sequential_study_whose_comparisons_are_all_decided_stands_at_its_last_look(client, app_engine):
    study_id, monitor = add_sequential_study(app_engine)  # every comparison decided, at look 4 at the latest
    assert not monitor.open_arms()
    start_study(app_engine, study_id)  # its driver has not recorded the end yet
    assert _json_phase(client, study_id) == "look 4 of 4"
