"""What the study page says of how a study ended: a failed trial's error as its first line with the trace
folded beneath it, whether the study holds every trial it planned (as GET /results says), and whom MLflow's
UI asks to sign in as."""

from __future__ import annotations

from studies.store import session_scope
from tests.factories import add_trial, submit
from tests.service.web.store_rows import PLANNED, SPEC, finish, record, start, trial_key

HTML = {"Accept": "text/html"}
ERROR = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 TiB\n"
    '  File "workers/training/loop.py", line 88, in run_epoch\n'
    "    loss = self.step(batch)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 TiB"
)


def _failed_trial(engine, study_id: str, seed: int, error: str | None) -> None:
    with session_scope(engine) as session:
        add_trial(
            session,
            study_id,
            trial_key(study_id, "dyt", seed),
            phase="grid",
            method="dyt",
            group="base",
            seed=seed,
            status="failed",
            error=error,
        )


def _error_cell(page: str, study_id: str, seed: int) -> str:
    row = page.split(f'data-trial-key="{trial_key(study_id, "dyt", seed)}"', 1)[1].split("</tr>", 1)[0]
    return row.rsplit('<td class="wrap muted">', 1)[1].rsplit("</td>", 1)[0]


def test_a_failed_trials_error_shows_its_first_line_with_the_trace_folded_beneath(client, app_engine):
    study_id = submit(client, SPEC)
    start(app_engine, study_id)
    _failed_trial(app_engine, study_id, 0, ERROR)
    _failed_trial(app_engine, study_id, 1, "RuntimeError: no trace recorded")
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    cell = _error_cell(page, study_id, 0)
    headline, folded = cell.split("<details", 1)
    assert headline.strip() == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 TiB"
    assert "<summary>trace</summary><pre>  File &#34;workers/training/loop.py&#34;, line 88" in folded
    assert "    loss = self.step(batch)\ntorch.OutOfMemoryError" in folded  # its lines kept apart
    one_line = _error_cell(page, study_id, 1)
    assert one_line.strip() == "RuntimeError: no trace recorded" and "<details" not in one_line
    fragment = client.get(f"/ui/studies/{study_id}/sections").text  # what the page swaps in while it runs
    assert _error_cell(fragment, study_id, 0) == cell


def test_an_ended_study_says_whether_it_holds_every_planned_trial_and_names_the_missing(client, app_engine):
    study_id = submit(client, SPEC)
    start(app_engine, study_id)
    for method in ("frozen_ln", "dyt"):
        record(app_engine, study_id, method, 0, epochs={1: 0.7}, finished=True, name="base")
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert 'id="completeness"' not in page  # while it runs its progress says how far it is
    finish(app_engine, study_id)  # marked succeeded with 4 of its 6 trials missing from the store
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert '<p id="completeness" class="warning" data-complete="false">' in page
    assert f"incomplete: the study is marked succeeded but 2 of {PLANNED} planned" in page
    missing = page.split('<details id="missing-trials">', 1)[1].split("</details>", 1)[0]
    assert "4 planned trials without an outcome" in missing
    assert "<li>dyt [base] seed 1</li>" in missing and "<li>frozen_ln [base] seed 2</li>" in missing


def test_a_complete_study_says_so_without_a_missing_list(client, app_engine):
    study_id = submit(client, SPEC)
    start(app_engine, study_id)
    for method in ("frozen_ln", "dyt"):
        for seed in (0, 1, 2):
            record(app_engine, study_id, method, seed, epochs={1: 0.7}, finished=True, name="base")
    finish(app_engine, study_id)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    assert '<p id="completeness" class="muted" data-complete="true">' in page
    assert f"complete: {PLANNED} of {PLANNED} planned final or grid trials have an outcome" in page
    assert 'id="missing-trials"' not in page


def test_the_pages_say_whom_mlflow_asks_to_sign_in_as_when_the_service_signs_in(client, monkeypatch):
    study_id = submit(client, SPEC)
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    assert 'id="mlflow-sign-in"' not in client.get(f"/studies/{study_id}", headers=HTML).text
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "normlab")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "never-shown-on-a-page")
    for page in (client.get(f"/studies/{study_id}", headers=HTML).text, client.get("/", headers=HTML).text):
        hint = page.split('id="mlflow-sign-in">', 1)[1].split("</p>", 1)[0]
        assert "user <code>normlab</code>" in hint and "<code>normlab token --mlflow</code>" in hint
        assert "never-shown-on-a-page" not in page


def test_a_study_with_a_ray_job_says_where_the_dashboards_token_is(client, app_engine):
    study_id = submit(client, SPEC)
    assert 'id="ray-sign-in"' not in client.get(f"/studies/{study_id}", headers=HTML).text  # no job yet
    start(app_engine, study_id)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    hint = page.split('id="ray-sign-in">', 1)[1].split("</p>", 1)[0]
    assert "<code>normlab token --ray</code>" in hint and "ray_auth_token" in hint


def test_each_trial_row_shows_the_knob_values_it_ran_with_the_optimisers_first(client, app_engine):
    study_id = submit(client, SPEC)
    start(app_engine, study_id)
    key = trial_key(study_id, "frozen_ln", 0)
    with session_scope(app_engine) as session:
        # As the driver stores a trial's config (workers: TrialConfig), its knobs under "knobs".
        config = {
            "method": "frozen_ln",
            "seed": 0,
            "knobs": {"tau": 0.5, "weight_decay": 0.01, "lr": 0.0054453},
        }
        add_trial(
            session, study_id, key, phase="grid", method="frozen_ln", seed=0, config=config, status="running"
        )
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    row = page.split(f'data-trial-key="{key}"', 1)[1].split("</tr>", 1)[0]
    cell = row.split('data-field="hyperparameters">', 1)[1].split("</td>", 1)[0]
    assert cell == "<code>lr 0.00545, weight_decay 0.01, tau 0.5</code>"


def test_a_running_study_with_finished_trials_says_how_long_is_left_at_its_pace(client, app_engine):
    study_id = submit(client, SPEC)
    start(app_engine, study_id)
    before = client.get(f"/studies/{study_id}", headers=HTML).text
    assert (
        "left at the pace so far" not in before.split('data-field="progress">', 1)[1].split("</span>", 1)[0]
    )
    record(app_engine, study_id, "frozen_ln", 0, epochs={1: 0.8}, finished=True)
    label = client.get(f"/studies/{study_id}", headers=HTML).text.split('data-field="progress">', 1)[1]
    assert (
        "1 / 6 trials" in label.split("</span>", 1)[0]
        and "left at the pace so far" in label.split("</span>", 1)[0]
    )
    assert client.get(f"/studies/{study_id}").json()["seconds_left"] >= 0
