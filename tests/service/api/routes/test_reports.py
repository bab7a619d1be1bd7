"""HTTP /studies/{id}/report: a study's trials, recorded straight through the store, turned into a
report that sets the catalog claim's numbers against the measured ones, with a verdict."""

from __future__ import annotations

import pytest
import yaml

from studies.catalog import spec_path
from tests.factories import add_epochs, add_trial, finish_study, start_study, submit

CIFAR10_SMOKE = spec_path("cifar10_autonorm_s_beats_frozen_ln", "smoke")
RANK_SMOKE = spec_path("rank_post_norm_collapse", "smoke")

# autonorm_s beats frozen_ln by about 2.5 points on every seed (the claim's direction), and frozen_ln has
# converged (digits' level is 0.95).
ACCURACY = {
    "autonorm_s": {0: 0.98, 1: 0.985, 2: 0.978, 3: 0.99, 4: 0.982},
    "frozen_ln": {0: 0.955, 1: 0.96, 2: 0.952, 3: 0.962, 4: 0.958},
}


def _record(engine, study_id, method, seed, value, *, metrics=None, group=None, knobs=None, phase="final"):
    key = f"{study_id}/{phase}/{method}/{group}/seed{seed}"
    add_trial(
        engine,
        study_id,
        key,
        phase=phase,
        method=method,
        config={"method": method, "seed": seed, "knobs": knobs or {}},
        seed=seed,
        metrics={"test_accuracy": value, **(metrics or {})},
        metric_value=value,
        group=group,
    )
    return key


def _finish(engine, study_id):
    start_study(engine, study_id)
    finish_study(engine, study_id)


@pytest.fixture
def claim_study(client, app_engine) -> str:
    study_id = submit(client, yaml.safe_load(CIFAR10_SMOKE.read_text()))
    gates = {f"gate_dyt_weight_{i}": 0.3 for i in range(5)} | {f"gate_entropy_{i}": 0.5 for i in range(5)}
    for method, by_seed in ACCURACY.items():
        for seed, value in by_seed.items():
            key = _record(
                app_engine, study_id, method, seed, value, metrics=gates if method == "autonorm_s" else {}
            )
            if method == "autonorm_s":
                frozen = gates | {"gates_frozen": 1, "freeze_epoch": 1}  # the freeze fired after epoch 1
                add_epochs(app_engine, study_id, key, {1: gates, 2: frozen})
    _finish(app_engine, study_id)
    return study_id


def test_the_json_report_names_the_claim_and_its_verdict_from_the_paired_seeds(client, claim_study):
    response = client.get(f"/studies/{claim_study}/report")
    assert response.status_code == 200
    report = response.json()
    assert report["claim"]["id"] == "cifar10_autonorm_s_beats_frozen_ln"
    assert report["verdict"] == "supported"
    (finding,) = report["result"]["findings"]
    assert finding["n"] == 5
    expected = sum(ACCURACY["autonorm_s"].values()) / 5 - sum(ACCURACY["frozen_ln"].values()) / 5
    assert finding["measured"] == pytest.approx(expected)
    assert finding["paper"] == pytest.approx(0.8635 - 0.8297)


def test_the_report_flags_stand_in_data_so_paper_numbers_are_not_compared_as_equals(client, claim_study):
    report = client.get(f"/studies/{claim_study}/report").json()
    assert report["dataset"]["dataset"] == "digits"
    assert report["dataset"]["paper_dataset"] == "cifar10"
    assert report["dataset"]["comparable"] is False
    assert report["dataset"]["is_stand_in"] is True  # digits stands in for mnist in the registry
    rows = {row["row"]: row for row in report["paper_vs_measured"]}
    assert rows["autonorm_s"]["paper"] == pytest.approx(0.8635)
    assert rows["autonorm_s"]["measured"] == pytest.approx(sum(ACCURACY["autonorm_s"].values()) / 5)
    assert rows["autonorm_s"]["comparable"] is False


def test_the_report_carries_provenance_seeds_versions_and_the_spec(client, claim_study):
    provenance = client.get(f"/studies/{claim_study}/report").json()["provenance"]
    assert provenance["study_id"] == claim_study
    assert provenance["seeds"] == [0, 1, 2, 3, 4]
    assert provenance["spec"]["claim"] == "cifar10_autonorm_s_beats_frozen_ln"
    assert provenance["git_revision"]
    assert {"numpy", "scipy", "torch"} <= set(provenance["packages"])
    assert provenance["finished_at"] is not None


def test_the_markdown_report_reads_claim_by_claim(client, claim_study):
    response = client.get(f"/studies/{claim_study}/report", params={"format": "md"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/markdown")
    text = response.text
    assert "**Verdict: SUPPORTED**" in text
    assert "On CIFAR-10 AutoNorm-S reaches 86.35 %" in text
    assert "not comparable" in text
    assert "## Paper vs measured" in text and "## Provenance" in text


def test_the_html_report_is_one_page_with_the_verdict_and_inline_svg_figures(client, claim_study):
    response = client.get(f"/studies/{claim_study}/report", params={"format": "html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert page.startswith("<!DOCTYPE html>")
    assert 'class="verdict supported"' in page
    assert page.count("<svg") >= 2  # the comparison's forest plot and the gate figures
    assert "<script" not in page


def test_a_study_without_a_claim_reports_its_comparison_with_the_reference(client, app_engine):
    study_id = submit(client)
    for method, by_seed in ACCURACY.items():
        for seed, value in list(by_seed.items())[:3]:
            _record(app_engine, study_id, method, seed, value)
    report = client.get(f"/studies/{study_id}/report").json()
    assert report["claim"] is None and report["verdict"] is None and report["result"] is None
    rows = {row["method"]: row for row in report["table"]["rows"]}
    assert rows["frozen_ln"]["verdict"] == "reference"
    assert rows["autonorm_s"]["n"] == 3
    assert "No paper claim" in client.get(f"/studies/{study_id}/report", params={"format": "md"}).text


def test_a_rank_grid_study_is_judged_on_the_epoch_zero_measurements(client, app_engine):
    study_id = submit(client, yaml.safe_load(RANK_SMOKE.read_text()))
    erank = {"pre": [0.41, 0.38, 0.44, 0.40], "post": [0.05, 0.06, 0.04, 0.055]}
    for placement, values in erank.items():
        for seed, value in enumerate(values):
            key = _record(
                app_engine,
                study_id,
                "frozen_ln",
                seed,
                0.3,
                phase="grid",
                group=f"norm_placement={placement}",
                knobs={"norm_placement": placement, "init_scale": 16.0},
            )
            ranks = {"init_erank_jacobian": value, "init_erank_repr_first": 0.3, "init_erank_repr_last": 0.2}
            # the rank at every depth l = 1..16: Post-Norm's falls like 1/l to its full-depth value,
            # Pre-Norm's is flat over the deeper half (a plateau, not a slower fall)
            jitter = 0.01 * (seed - 1.5) if placement == "post" else 0.01 * ((3 * seed) % 4 - 1.5)
            exponent = (-0.9 if placement == "post" else 0.0) + jitter
            ranks |= {f"init_erank_jacobian_{d}": value * (d / 16) ** exponent for d in range(1, 17)}
            add_epochs(app_engine, study_id, key, {0: ranks})
    report = client.get(f"/studies/{study_id}/report").json()
    assert report["claim"]["paper"] == "transforming_rank"
    assert report["verdict"] == "supported", report["result"]["summary"]
    verdicts = [f["verdict"] for f in report["result"]["findings"]]
    assert len(verdicts) >= 4 and set(verdicts) == {"supported"}


def test_a_study_still_queued_gets_a_not_tested_report_that_says_so(client):
    study_id = submit(client, yaml.safe_load(CIFAR10_SMOKE.read_text()))
    report = client.get(f"/studies/{study_id}/report").json()
    assert report["verdict"] == "not tested"
    assert any("queued" in note for note in report["notes"])


def test_a_study_is_judged_against_another_claim_it_serves(client, claim_study):
    response = client.get(f"/studies/{claim_study}/report", params={"claim": "vision_gates_collapse_to_ln"})
    assert response.status_code == 200
    report = response.json()
    assert report["claim"]["id"] == "vision_gates_collapse_to_ln"
    assert report["result"]["check"] == "gate_pattern"


def test_a_claim_the_study_does_not_serve_is_a_422_naming_the_ones_it_does(client, claim_study):
    response = client.get(f"/studies/{claim_study}/report", params={"claim": "ptb_perplexity"})
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["query", "claim"]
    assert "cifar10_stabilisation" in detail["msg"] and "vision_gates_collapse_to_ln" in detail["msg"]


def test_a_reference_that_did_not_converge_gives_no_verdict(client, app_engine):
    study_id = submit(client, yaml.safe_load(CIFAR10_SMOKE.read_text()))
    for method, base in (("autonorm_s", 0.27), ("frozen_ln", 0.35)):
        for seed in range(5):
            _record(app_engine, study_id, method, seed, base + 0.01 * seed)
    _finish(app_engine, study_id)
    report = client.get(f"/studies/{study_id}/report").json()
    assert report["verdict"] == "not tested"
    assert (
        report["result"]["reason"]
        == "reference did not converge: frozen_ln test_accuracy 0.37, needs >= 0.95"
    )
    assert report["result"]["findings"] == []
    assert [p["met"] for p in report["preconditions"]][:3] == [True, True, False]
    # these trials record no freeze, so AutoNorm-S's freeze row is unmet too (the reference comes first)
    assert [p["name"] for p in report["preconditions"]][3].startswith("freeze")


def test_an_unknown_study_is_a_404(client):
    response = client.get("/studies/no-such-study/report")
    assert response.status_code == 404
    assert "no-such-study" in response.json()["detail"]


def test_an_unknown_format_is_a_422_at_the_query_parameter(client, claim_study):
    response = client.get(f"/studies/{claim_study}/report", params={"format": "pdf"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "format"]


def test_the_report_route_documents_its_formats_and_error_statuses(app):
    operation = app.openapi()["paths"]["/studies/{study_id}/report"]["get"]
    assert set(operation["responses"]) == {"200", "404", "422", "503"}
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/markdown", "text/html"}
