"""A study report, built from plain trials: claim, paper vs measured (flagged when the data differ from
the paper's), the verdict with its findings, the comparison table, figures and provenance, in markdown,
HTML and JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from studies.catalog import get_claim
from studies.claims import StudyData, TrialData
from studies.report import Provenance, build_report

AUTONORM_S = [0.90, 0.91, 0.89, 0.92, 0.905]
FROZEN_LN = [0.85, 0.86, 0.845, 0.862, 0.851]


def _data(dataset: str = "cifar10", *, autonorm_s=AUTONORM_S, frozen_ln=FROZEN_LN) -> StudyData:
    # Every AutoNorm-S seed froze (after epoch 2): otherwise it ran as AutoNorm and the claim is not tested.
    froze = (
        {"epoch": 0, "gates_frozen": 0, "freeze_epoch": -1},
        {"epoch": 4, "gates_frozen": 1, "freeze_epoch": 2},
    )
    trials = [TrialData("autonorm_s", s, "succeeded", v, history=froze) for s, v in enumerate(autonorm_s)]
    trials += [TrialData("frozen_ln", s, "succeeded", v) for s, v in enumerate(frozen_ln)]
    trials.append(TrialData("frozen_ln", 5, "failed", None))
    return StudyData(dataset, "test_accuracy", True, "frozen_ln", tuple(trials))


PROVENANCE = Provenance(
    study_id="st-1",
    study_name="catalog-cifar10",
    status="succeeded",
    spec={"name": "catalog-cifar10", "claim": "cifar10_autonorm_s_beats_frozen_ln", "seeds": [0, 1, 2, 3, 4]},
    seeds=(0, 1, 2, 3, 4, 5),
    tune_seeds=(6,),
    split_seed=0,
    normlab_version="0.1.0",
    git_revision="abc123",
    packages={"numpy": "2.4", "scipy": "1.17"},
    generated_at="2026-01-01T00:00:00+00:00",
)
CLAIM = get_claim("cifar10_autonorm_s_beats_frozen_ln")


@dataclass(frozen=True)
class _Figure:
    name: str
    caption: str
    svg: str


def test_a_claim_report_sets_the_papers_numbers_next_to_the_measured_means():
    report = build_report(_data(), provenance=PROVENANCE, claim=CLAIM)
    assert report.verdict == "supported"
    assert report.dataset.comparable
    rows = {r.row: r for r in report.paper_vs_measured}
    assert set(rows) == {"autonorm_s", "frozen_ln"}  # random_selector did not run in this study
    assert rows["autonorm_s"].paper == 0.8635
    assert rows["autonorm_s"].measured == pytest.approx(sum(AUTONORM_S) / 5)
    assert rows["frozen_ln"].n == 5  # the failed seed is not a value
    assert rows["autonorm_s"].ci_low < rows["autonorm_s"].measured < rows["autonorm_s"].ci_high


def test_a_report_on_other_data_flags_the_papers_numbers_as_not_comparable():
    report = build_report(_data("digits"), provenance=PROVENANCE, claim=CLAIM)
    assert not report.dataset.comparable and report.dataset.is_stand_in
    assert "digits (a stand-in for mnist, not for cifar10)" in report.dataset.note
    assert all(not r.comparable for r in report.paper_vs_measured)
    assert report.table is not None and not report.table.has_paper_values  # no paper column on other data
    assert "shown for orientation only" in report.to_markdown()


def test_the_comparison_table_counts_planned_and_failed_seeds():
    report = build_report(
        _data(),
        provenance=PROVENANCE,
        claim=CLAIM,
        planned_seeds={"autonorm_s": range(6), "frozen_ln": range(6)},
    )
    rows = {r.method: r for r in report.table.rows}
    assert (rows["frozen_ln"].n, rows["frozen_ln"].n_failed, rows["frozen_ln"].n_planned) == (5, 1, 6)
    assert rows["autonorm_s"].verdict == "better"


def test_a_study_without_a_claim_is_a_comparison_with_its_reference():
    report = build_report(_data(), provenance=PROVENANCE, spec_paper_numbers={"autonorm_s": 0.86})
    assert report.claim is None and report.result is None and report.verdict is None
    assert [r.row for r in report.paper_vs_measured] == ["autonorm_s"]
    text = report.to_markdown()
    assert "No paper claim" in text and "## Findings" not in text


def test_a_study_with_no_completed_trial_says_so():
    data = StudyData("cifar10", "test_accuracy", True, "frozen_ln", ())
    report = build_report(data, provenance=PROVENANCE, claim=CLAIM)
    assert report.verdict == "not tested"
    assert report.table is None
    assert any("no trial of this study has completed" in n for n in report.notes)


def test_markdown_reads_claim_verdict_findings_table_and_provenance_in_order():
    text = build_report(_data(), provenance=PROVENANCE, claim=CLAIM).to_markdown()
    order = [
        "> On CIFAR-10 AutoNorm-S reaches 86.35 %",
        "**The paper reports:**",
        "**Verdict: SUPPORTED**",
        "## Paper vs measured",
        "## Findings (check `difference`)",
        "## Comparison with the reference",
        "## Provenance",
        "```yaml",
    ]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "abc123" in text and "numpy 2.4" in text


def test_an_inconclusive_verdict_quotes_the_minimum_detectable_effect():
    report = build_report(
        _data(autonorm_s=[0.90, 0.80, 0.88, 0.83, 0.86]), provenance=PROVENANCE, claim=CLAIM
    )
    assert report.verdict == "inconclusive"
    text = report.to_markdown()
    assert "INCONCLUSIVE at this power" in text
    assert f"{report.result.findings[0].mde:.4g}" in text


def test_html_is_one_self_contained_page_with_inline_figures():
    figure = _Figure("gates", "Final DyT weight per layer", '<svg viewBox="0 0 10 10"><rect/></svg>')
    page = build_report(_data(), provenance=PROVENANCE, claim=CLAIM, figures=[figure]).to_html()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert '<span class="verdict supported">' in page
    assert figure.svg in page and "Final DyT weight per layer" in page
    assert page.count("<svg") == 2  # the comparison's forest plot and the figure
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_html_escapes_text_from_the_spec():
    provenance = Provenance(**{**PROVENANCE.__dict__, "study_name": "<b>bold</b>"})
    page = build_report(_data(), provenance=provenance, claim=CLAIM).to_html()
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def test_json_is_strict_and_carries_every_section():
    report = build_report(_data(), provenance=PROVENANCE, claim=CLAIM).to_json()
    json.dumps(report, allow_nan=False)
    assert report["verdict"] == "supported"
    assert report["claim"]["check"]["type"] == "difference"
    assert report["result"]["findings"][0]["paper"] == pytest.approx(0.0338)
    assert report["dataset"]["comparable"] is True
    assert report["provenance"]["git_revision"] == "abc123"
    assert {row["method"] for row in report["table"]["rows"]} == {"autonorm_s", "frozen_ln"}


def test_a_study_without_a_claim_on_a_stand_in_flags_its_spec_paper_numbers():
    report = build_report(_data("digits"), provenance=PROVENANCE, spec_paper_numbers={"autonorm_s": 0.99})
    assert not report.dataset.comparable
    assert (
        report.dataset.note
        == "measured on digits (a stand-in for mnist): paper numbers for mnist are not comparable"
    )
    assert [r.comparable for r in report.paper_vs_measured] == [False]
