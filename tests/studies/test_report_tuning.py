"""A study report with tuning views: its knob importance table (with what the spread is over), the best
tune trial, why a number is missing, and the tuning figures, in markdown, HTML and JSON; a report without
tuning has no such section."""

from __future__ import annotations

import json

from studies.report import build_report
from studies.tuning import study_tuning
from tests.studies.test_report_build import PROVENANCE, _data
from tests.studies.test_tables_tuning_svg import TUNE
from tests.studies.tuning.test_build import COMPARE

TUNING = study_tuning(COMPARE, TUNE, study_id="st-1")


def test_the_report_shows_the_importance_table_the_spread_and_the_best_tune_trial():
    report = build_report(_data(), provenance=PROVENANCE, tuning=TUNING)
    markdown = report.to_markdown()
    section = markdown[markdown.index("## Knob importance and optimisation history") :]
    assert "| knob | fANOVA | PED-ANOVA |" in section
    assert "fANOVA: mean ± sd [lowest, highest] of 5 fits, over fANOVA forest seeds" in section
    assert "PED-ANOVA: one fit, no spread" in section
    assert "best of 8 tune trials (7 scored)" in section
    html = report.to_html()
    assert "<h2>Knob importance and optimisation history</h2>" in html
    assert "<h3>autonorm_s</h3>" in html


def test_the_tuning_figures_join_the_reports_figures_and_the_json_carries_the_views():
    report = build_report(_data(), provenance=PROVENANCE, tuning=TUNING)
    names = [f.name for f in report.figures]
    assert "knob_importance_autonorm_s" in names and "optimisation_history_autonorm_s" in names
    payload = json.loads(json.dumps(report.to_json()))
    assert payload["tuning"]["methods"][0]["method"] == "autonorm_s"


def test_a_method_with_too_few_tune_trials_says_so_in_the_report():
    early = study_tuning(COMPARE, TUNE[:2], study_id="st-1")
    markdown = build_report(_data(), provenance=PROVENANCE, tuning=early).to_markdown()
    assert "importance: not enough tune trials: 2 completed with a finite objective" in markdown
    assert "| knob |" not in markdown[markdown.index("## Knob importance") :].split("## Figures")[0]


def test_a_report_without_tuning_has_no_tuning_section():
    report = build_report(_data(), provenance=PROVENANCE)
    assert "Knob importance" not in report.to_markdown() and report.to_json()["tuning"] is None
