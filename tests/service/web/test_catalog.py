"""The catalog page: every claim of studies.catalog with its latest verdict per size, read from the
reports scripts/run_catalog.py leaves (reports/ for cpu, reports/smoke/, reports/paper/); `not run` where
a size has no report, `no study` where the catalog has no study of that size; a report whose fingerprint
differs from this tree's, or which has none, marked stale with the reason; the stored HTML reports
served behind it, and nothing else from the folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.settings import Settings
from service.web.catalog import DEFAULT_REPORTS_DIR, NO_STUDY, NOT_RUN, SHOWN_TIERS, catalog_verdicts
from studies.catalog import claim_ids, get_claim, spec_path
from studies.catalog.fingerprint import claim_fingerprint

HTML = {"Accept": "text/html"}
CLAIM = "california_housing_no_gain"
NO_CPU_STUDY = "cifar100_autonorm_s_beats_frozen_ln"  # no offline 100-class dataset: no cpu spec


def _report(
    folder: Path,
    claim: str,
    verdict: str,
    *,
    reason: str | None = None,
    html: bool = True,
    fingerprint: dict | None = None,
    dataset: str | None = None,
) -> None:
    """A stored report; with `fingerprint`, the one run_catalog.py recorded when it wrote the report;
    `dataset`: the one the study ran on."""
    folder.mkdir(parents=True, exist_ok=True)
    provenance = {"generated_at": "2026-12-03T18:38:44+00:00"}
    if fingerprint is not None:
        provenance["fingerprint"] = fingerprint
    report = {
        "study_id": "abc123",
        "verdict": verdict,
        "result": {"verdict": verdict, "reason": reason},
        "provenance": provenance,
    } | ({"dataset": dataset} if dataset else {})
    (folder / f"{claim}.json").write_text(json.dumps(report), encoding="utf-8")
    if html:
        (folder / f"{claim}.html").write_text(f"<h1>{claim} report</h1>", encoding="utf-8")


@pytest.fixture
def reports(tmp_path: Path, settings: Settings) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    settings.catalog_reports_dir = folder  # NORMLAB_CATALOG_REPORTS_DIR, read by the app built on them
    return folder


def test_every_claim_has_a_verdict_per_size_not_run_where_no_report_was_written(tmp_path):
    rows = catalog_verdicts(tmp_path)
    assert [row.id for row in rows] == list(claim_ids())
    for row in rows:
        assert [v.tier for v in row.verdicts] == list(SHOWN_TIERS)  # the sizes that count first
        assert {v.verdict for v in row.verdicts} <= {NOT_RUN, NO_STUDY}


def test_a_size_the_catalog_has_no_study_for_says_why():
    row = next(r for r in catalog_verdicts(Path("/nonexistent")) if r.id == NO_CPU_STUDY)
    cpu = next(v for v in row.verdicts if v.tier == "cpu")
    assert cpu.verdict == NO_STUDY
    assert cpu.reason == get_claim(NO_CPU_STUDY).no_spec["cpu"]


def test_the_verdicts_come_from_each_sizes_folder(tmp_path):
    _report(tmp_path, CLAIM, "supported")  # cpu: the folder itself
    _report(tmp_path / "smoke", CLAIM, "not tested", reason="reference did not converge")
    row = next(r for r in catalog_verdicts(tmp_path) if r.id == CLAIM)
    cpu, paper, smoke = row.verdicts
    assert (cpu.verdict, cpu.study_id, cpu.report_url) == (
        "supported",
        "abc123",
        f"/catalog/reports/cpu/{CLAIM}",
    )
    assert (smoke.verdict, smoke.reason) == ("not tested", "reference did not converge")
    assert paper.verdict == NOT_RUN
    assert row.counting is cpu  # paper has no report: the cpu verdict is the one that counts


def test_a_smoke_report_is_shown_as_a_pipeline_check_and_never_counts(tmp_path):
    _report(tmp_path / "smoke", CLAIM, "contradicted")
    row = next(r for r in catalog_verdicts(tmp_path) if r.id == CLAIM)
    smoke = row.verdicts[-1]
    assert (smoke.badge, smoke.css) == ("pipeline check: ran", "pipeline")
    assert smoke.title == "smoke size, no scientific weight: its report said contradicted"
    assert row.counting is None  # no cpu or paper report: no verdict yet


def test_the_paper_sizes_verdict_counts_over_the_cpu_sizes(tmp_path):
    _report(tmp_path, CLAIM, "inconclusive")
    _report(tmp_path / "paper", CLAIM, "supported")
    row = next(r for r in catalog_verdicts(tmp_path) if r.id == CLAIM)
    assert (row.counting.tier, row.counting.verdict) == ("paper", "supported")


def test_a_report_left_from_a_study_the_catalog_no_longer_has_is_no_verdict(tmp_path):
    """As in the index: the catalog's reason stands, not the verdict of a study it dropped."""
    _report(tmp_path, NO_CPU_STUDY, "inconclusive")
    row = next(r for r in catalog_verdicts(tmp_path) if r.id == NO_CPU_STUDY)
    assert (row.verdicts[0].verdict, row.verdicts[0].reason) == (
        NO_STUDY,
        get_claim(NO_CPU_STUDY).no_spec["cpu"],
    )


def test_an_unreadable_report_counts_as_not_run(tmp_path):
    (tmp_path / f"{CLAIM}.json").write_text("{ half written", encoding="utf-8")
    row = next(r for r in catalog_verdicts(tmp_path) if r.id == CLAIM)
    assert row.verdicts[0].verdict == NOT_RUN


def _current(claim: str, tier: str) -> dict:
    return claim_fingerprint(claim, spec_path(claim, tier)).to_json()


def test_a_report_with_this_trees_fingerprint_is_current_and_one_without_is_stale(tmp_path):
    _report(tmp_path, CLAIM, "supported", fingerprint=_current(CLAIM, "cpu"))
    _report(tmp_path / "smoke", CLAIM, "supported")  # written before reports recorded fingerprints
    cpu, paper, smoke = next(r for r in catalog_verdicts(tmp_path) if r.id == CLAIM).verdicts
    assert cpu.stale is None
    assert smoke.stale == "no fingerprint: predates fingerprinting"
    assert paper.stale is None  # not run: no report to be stale


def test_a_report_judged_with_another_spec_is_stale_and_says_so(tmp_path):
    recorded = _current(CLAIM, "cpu") | {"spec": "0" * 64}
    _report(tmp_path, CLAIM, "supported", fingerprint=recorded)
    cpu = next(r for r in catalog_verdicts(tmp_path) if r.id == CLAIM).verdicts[0]
    assert (cpu.verdict, cpu.stale) == ("supported", "spec changed")


def test_the_catalog_page_marks_a_stale_verdict(client, reports):
    _report(reports, CLAIM, "supported", fingerprint=_current(CLAIM, "cpu") | {"check_code": "0" * 64})
    text = client.get("/catalog", headers=HTML).text
    assert (
        '<td class="wrap" data-tier="cpu" data-verdict="supported" data-stale="check code changed">' in text
    )
    assert '<span class="verdict stale warning" title="check code changed">stale</span>' in text
    assert text.count("data-stale=") == 1  # the other claims have no report


def test_a_verdict_on_a_stand_in_says_what_it_ran_on_and_a_stale_one_is_drawn_faded(client, reports):
    claim = "cifar10_autonorm_s_beats_frozen_ln"
    stale = _current(claim, "cpu") | {"check_code": "0" * 64}
    _report(reports, claim, "contradicted", fingerprint=stale, dataset="digits_c")
    _report(reports, CLAIM, "supported", fingerprint=_current(CLAIM, "cpu"), dataset="california_housing")
    text = client.get("/catalog", headers=HTML).text
    cell = text.split(f'data-claim="{claim}"', 1)[1].split('data-tier="cpu"', 1)[1].split("</td>", 1)[0]
    assert '<span class="verdict contradicted superseded">contradicted on digits_c (stand-in)</span>' in cell
    own = text.split(f'data-claim="{CLAIM}"', 1)[1].split('data-tier="cpu"', 1)[1].split("</td>", 1)[0]
    assert '<span class="verdict supported">supported</span>' in own


def test_the_catalog_page_shows_each_claims_verdicts_and_links_the_stored_reports(client, reports):
    _report(reports, CLAIM, "supported", fingerprint=_current(CLAIM, "cpu"))
    page = client.get("/catalog", headers=HTML)
    assert page.status_code == 200
    text = page.text
    assert text.count('<tr class="claim"') == len(claim_ids())
    assert '<td class="wrap" data-tier="cpu" data-verdict="supported">' in text
    assert f'href="/catalog/reports/cpu/{CLAIM}"' in text
    assert 'data-verdict="not run"' in text
    stored = client.get(f"/catalog/reports/cpu/{CLAIM}")
    assert stored.status_code == 200
    assert stored.headers["content-type"].startswith("text/html")
    assert f"<h1>{CLAIM} report</h1>" in stored.text


@pytest.mark.parametrize(
    "path",
    [
        f"/catalog/reports/smoke/{CLAIM}",  # no report of that size
        "/catalog/reports/huge/california_housing_no_gain",  # no such size
        "/catalog/reports/cpu/no_such_claim",
        "/catalog/reports/cpu/..%2F..%2Fetc%2Fpasswd",
    ],
)
def test_nothing_but_a_stored_report_of_a_known_claim_and_size_is_served(client, reports, path):
    _report(reports, CLAIM, "supported")
    response = client.get(path, headers=HTML)
    assert response.status_code == 404
    assert "root:" not in response.text


def test_the_source_trees_reports_are_read_by_default(client, settings):
    assert settings.catalog_reports_dir is None
    assert (DEFAULT_REPORTS_DIR / "README.md").is_file()  # where scripts/run_catalog.py writes the cpu size
    rows = catalog_verdicts(DEFAULT_REPORTS_DIR)
    recorded = [
        (row.id, v.tier) for row in rows for v in row.verdicts if v.verdict not in (NOT_RUN, NO_STUDY)
    ]
    assert recorded
    claim, tier = recorded[0]
    assert f'href="/catalog/reports/{tier}/{claim}"' in client.get("/catalog", headers=HTML).text


def test_an_installed_service_is_told_where_the_reports_are(tmp_path, monkeypatch):
    """The Docker image has no source tree: it sets NORMLAB_CATALOG_REPORTS_DIR to the reports it ships."""
    monkeypatch.setenv("NORMLAB_CATALOG_REPORTS_DIR", str(tmp_path))
    assert Settings(_env_file=None).catalog_reports_dir == tmp_path
    assert Settings(_env_file=None, catalog_reports_dir="~/r").catalog_reports_dir == Path.home() / "r"
    dockerfile = (Path(__file__).parents[3] / "docker" / "Dockerfile").read_text()
    assert "COPY reports ./reports" in dockerfile
    assert "ENV NORMLAB_CATALOG_REPORTS_DIR=/opt/normlab/reports" in dockerfile
