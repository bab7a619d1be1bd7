"""HTTP /results/{dataset} of a sequential study: its comparisons carry the repeated interval and the
stage-wise p-value of its looks, labelled as such, with the study's summary in a `sequential` block; the
markdown and HTML say the design and how each comparison stopped; a fixed-seed study's results have no such
block."""

from __future__ import annotations

import pytest

from tests.factories import add_final_trials, submit
from tests.studies.store.sequential_study import add_sequential_study

# A fixed-seed study (QUICK_SPEC_YAML's methods): seeds 0 to 2 each.
FIXED_ACCURACY = {
    "frozen_ln": [0.90, 0.91, 0.89],
    "dyt": [0.93, 0.94, 0.92],
    "autonorm_s": [0.905, 0.90, 0.9],
}
DESIGN = "sequential: superiority, O'Brien-Fleming, looks at 3/5/7/9 seeds, alpha 0.05 family-wise"


@pytest.fixture
def sequential_study(app_engine) -> tuple[str, dict]:
    study_id, monitor = add_sequential_study(app_engine)
    return study_id, {o.method: o for o in monitor.outcomes()}


def test_the_json_rows_carry_the_repeated_interval_and_the_block_the_studys_summary(client, sequential_study):
    study_id, outcomes = sequential_study
    payload = client.get(f"/results/digits?study={study_id}").json()
    rows = {row["method"]: row for row in payload["rows"]}
    for method in ("dyt", "autonorm"):
        row, outcome = rows[method], outcomes[method]
        assert [row["diff_ci_low"], row["diff_ci_high"]] == pytest.approx(list(outcome.interval))
        assert row["p_value"] == pytest.approx(outcome.p_value) and row["p_adjusted"] is None
        level = f"{100 * outcome.interval_level:g}"  # each at the level it was tested at (Holm)
        assert row["test"] == f"group-sequential: {level} % repeated CI, stage-wise p"
    assert rows["dyt"]["n_planned"] == 5  # stopped at look 2
    block = payload["sequential"][study_id]
    assert block["description"] == DESIGN
    assert block["trials"] == {"run": 23, "fixed_design": 27, "saved": 4, "saved_fraction": 4 / 27}
    assert [(o["method"], o["stopped_at_look"]) for o in block["outcomes"]] == [("dyt", 2), ("autonorm", 4)]
    assert block == client.get(f"/studies/{study_id}").json()["sequential"]


def test_the_markdown_and_html_show_the_design_and_where_each_comparison_stopped(client, sequential_study):
    study_id, _ = sequential_study
    markdown = client.get(f"/results/digits?study={study_id}&format=md").text
    assert f"**Sequential study {study_id}**: {DESIGN}" in markdown
    assert "- dyt vs frozen_ln: stopped: differs from the reference at look 2 (5 paired seeds" in markdown
    html = client.get(f"/results/digits?study={study_id}&format=html").text
    assert "<h2>Sequential design</h2>" in html
    assert "autonorm vs frozen_ln: stopped: differs from the reference at look 4 (9 paired seeds" in html
    csv_text = client.get(f"/results/digits?study={study_id}&format=csv").text
    assert "group-sequential: 97.5 % repeated CI, stage-wise p" in csv_text  # DyT, tested at 0.025
    assert "group-sequential: 95 % repeated CI, stage-wise p" in csv_text  # AutoNorm, at 0.05 after DyT


def test_pooled_with_a_fixed_study_no_comparison_is_tested(client, app_engine, sequential_study):
    study_id, _ = sequential_study
    add_final_trials(app_engine, submit(client), FIXED_ACCURACY)
    payload = client.get("/results/digits?study=all").json()
    compared = [row for row in payload["rows"] if not row["is_reference"]]
    assert compared and all(row["verdict"] == "not tested (sequential seeds)" for row in compared)
    assert all(row["diff_ci_low"] is None and row["p_value"] is None for row in compared)
    assert set(payload["sequential"]) == {study_id}


def test_a_fixed_seed_studys_results_have_no_sequential_block(client, app_engine):
    add_final_trials(app_engine, submit(client), FIXED_ACCURACY)
    payload = client.get("/results/digits").json()
    assert "sequential" not in payload
    assert "Sequential" not in client.get("/results/digits?format=md").text
