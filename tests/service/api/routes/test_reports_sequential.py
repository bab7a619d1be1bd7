"""A sequential study's report: its comparisons are the design's (repeated interval, stage-wise p, the
level each was tested at), stopped arms are planned only the seeds their looks gave them, the monitoring
figure is there, and a note says how many seed-trials the looks saved against the fixed design."""

from __future__ import annotations

from tests.studies.store.sequential_study import add_sequential_study


def test_the_report_shows_the_designs_comparisons_figure_and_savings(client, app_engine):
    study_id, monitor = add_sequential_study(app_engine)
    outcomes = {o.method: o for o in monitor.outcomes()}
    report = client.get(f"/studies/{study_id}/report?format=json").json()
    rows = {row["method"]: row for row in report["table"]["rows"]}
    dyt = outcomes["dyt"]
    assert [rows["dyt"]["diff_ci_low"], rows["dyt"]["diff_ci_high"]] == list(dyt.interval)
    assert rows["dyt"]["test"] == "group-sequential: 97.5 % repeated CI, stage-wise p"
    assert rows["dyt"]["n_planned"] == 5  # stopped at look 2: planned no more seeds
    assert report["table"]["sequential"][study_id]["trials"]["saved"] == 4
    assert any("23 seed-trials against the fixed design's 27" in note for note in report["notes"])
    markdown = client.get(f"/studies/{study_id}/report?format=md").text
    assert "dyt vs frozen_ln: stopped: differs from the reference at look 2" in markdown
    html = client.get(f"/studies/{study_id}/report?format=html").text
    assert 'class="sequential-monitoring"' in html and 'data-decision="efficacy"' in html
