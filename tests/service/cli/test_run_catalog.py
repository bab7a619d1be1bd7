"""scripts/run_catalog.py against the real app (FastAPI's TestClient stands in for the network): submit a
catalog claim's smoke study, wait for it, write its reports and the index, which keeps verdicts on the
paper's data, about stand-ins and not tested apart; claims that share a study are run once."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from studies.catalog import claim_ids
from tests.factories import run_to_the_end

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "run_catalog.py"
CLAIM = "cifar10_autonorm_s_beats_frozen_ln"


def _load_script():
    spec = importlib.util.spec_from_file_location("run_catalog", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_catalog(wired):
    return _load_script()


def _run_study_to_the_end(engine, study_id: str, levels=(("autonorm_s", 0.98), ("frozen_ln", 0.96))) -> None:
    """What the cluster does while the script waits: run the final phase, then end the study."""
    run_to_the_end(
        engine,
        study_id,
        {
            method: [
                base + (0.003 * seed if method == "frozen_ln" else 0.002 * (seed % 2)) for seed in range(5)
            ]
            for method, base in levels
        },
    )


def test_the_runner_submits_waits_and_writes_the_reports_and_the_index(
    run_catalog, app_engine, client, monkeypatch, tmp_path
):
    def sleep(_seconds):
        (study,) = client.get("/studies").json()
        if study["status"] == "queued":
            _run_study_to_the_end(app_engine, study["id"])

    monkeypatch.setattr(run_catalog.time, "sleep", sleep)
    reports = tmp_path / "reports"
    code = run_catalog.main(["--claim", CLAIM, "--output", str(reports), "--poll", "0"])
    assert code == 0
    assert {p.name for p in reports.iterdir()} == {f"{CLAIM}.{ext}" for ext in ("md", "html", "json")} | {
        "README.md"
    }
    assert json.loads((reports / f"{CLAIM}.json").read_text())["verdict"] == "supported"
    index = (reports / "README.md").read_text()
    row = next(line for line in index.splitlines() if CLAIM in line)
    assert "| supported |" in row
    assert "digits (stand-in for mnist; paper: cifar10, not comparable)" in row
    assert f"[html]({CLAIM}.html)" in row
    # a verdict on digits is about the stand-in, and is tallied with those alone
    assert (
        "## Verdicts about stand-ins (about the stand-in dataset, not the paper's): "
        "1 supported (1 independent experiment)\n"
    ) in index
    assert "## Stale reports: 0 of 1" in index  # written now, with this tree's fingerprint
    assert json.loads((reports / f"{CLAIM}.json").read_text())["provenance"]["fingerprint"]["claim"]
    assert "## Verdicts on the paper's data" not in index
    assert "no scientific weight" in index


def test_a_reference_that_did_not_converge_is_listed_as_not_tested(
    run_catalog, app_engine, client, monkeypatch, tmp_path
):
    def sleep(_seconds):
        (study,) = client.get("/studies").json()
        if study["status"] == "queued":  # FrozenLN at 85 % on digits: below digits' level of 0.95
            _run_study_to_the_end(app_engine, study["id"], (("autonorm_s", 0.90), ("frozen_ln", 0.85)))

    monkeypatch.setattr(run_catalog.time, "sleep", sleep)
    reports = tmp_path / "reports"
    assert run_catalog.main(["--claim", CLAIM, "--output", str(reports), "--poll", "0"]) == 0
    report = json.loads((reports / f"{CLAIM}.json").read_text())
    assert report["verdict"] == "not tested"
    assert report["result"]["reason"] == (
        "reference did not converge: frozen_ln test_accuracy 0.856, needs >= 0.95"
    )
    index = (reports / "README.md").read_text()
    row = next(line for line in index.splitlines() if f"`{CLAIM}`" in line)
    assert "| not tested: reference did not converge: frozen_ln test_accuracy 0.856, needs >= 0.95 |" in row
    assert "## Verdicts about stand-ins" not in index  # nothing tested: no verdict is tallied


def test_the_index_covers_the_whole_catalog_and_keeps_earlier_reports(run_catalog, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    earlier = {"study_id": "s1", "verdict": "supported", "scope": "init", "result": {}, "provenance": {}}
    (reports / "rank_post_norm_collapse.json").write_text(json.dumps(earlier))
    assert run_catalog.main(["--index-only", "--size", "smoke", "--output", str(reports)]) == 0
    index = (reports / "README.md").read_text()
    # a report with no fingerprint predates fingerprinting: its verdict is stale, tallied apart
    assert (
        "## Verdicts at initialisation (the claims hold on any input): none current; "
        "stale (not counted as current): 1 supported (1 independent experiment)"
    ) in index
    rows = [line for line in index.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == len(claim_ids())  # every claim of the catalog, run or not
    row = next(line for line in rows if "`ptb_perplexity`" in line)
    assert "not run at the smoke size yet" in row


def test_claims_that_share_a_study_run_it_once_and_a_claim_without_a_study_says_why(
    run_catalog, app_engine, client, monkeypatch, tmp_path
):
    def sleep(_seconds):
        for study in client.get("/studies").json():
            if study["status"] == "queued":
                _run_study_to_the_end(app_engine, study["id"])

    monkeypatch.setattr(run_catalog.time, "sleep", sleep)
    reports = tmp_path / "reports"
    claims = [CLAIM, "cifar10_stabilisation", "cifar100_autonorm_s_beats_frozen_ln"]
    args = [arg for claim in claims for arg in ("--claim", claim)]
    assert run_catalog.main([*args, "--output", str(reports), "--poll", "0"]) == 0
    assert len(client.get("/studies").json()) == 1  # the CIFAR-10 study, once
    stabilisation = json.loads((reports / "cifar10_stabilisation.json").read_text())
    assert stabilisation["claim"]["id"] == "cifar10_stabilisation"
    assert stabilisation["result"]["check"] == "ordering"
    index = (reports / "README.md").read_text()
    row = next(line for line in index.splitlines() if "`cifar10_stabilisation`" in line)
    assert f"same study as `{CLAIM}`" in row
    row = next(line for line in index.splitlines() if "`cifar100_autonorm_s_beats_frozen_ln`" in line)
    assert "| not tested |" in row and "no offline 100-class image dataset" in row
    assert not (reports / "cifar100_autonorm_s_beats_frozen_ln.json").exists()


def test_an_unknown_claim_is_refused_before_anything_is_submitted(run_catalog, client, capsys):
    with pytest.raises(SystemExit):
        run_catalog.main(["--claim", "no_such_claim"])
    assert "unknown claim(s) no_such_claim" in capsys.readouterr().err
    assert client.get("/studies").json() == []


def test_the_index_names_each_commit_its_reports_came_from(run_catalog, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    for claim, revision in (("rank_post_norm_collapse", "aaa111"), ("mean_spike_one_matrix_relu", "bbb222")):
        report = {
            "study_id": claim,
            "verdict": "supported",
            "scope": "init",
            "result": {},
            "provenance": {"normlab_version": "0.1.0", "git_revision": revision},
        }
        (reports / f"{claim}.json").write_text(json.dumps(report))
    assert run_catalog.main(["--index-only", "--size", "cpu", "--output", str(reports)]) == 0
    index = (reports / "README.md").read_text()
    assert "- NormLab 0.1.0 (git aaa111): `rank_post_norm_collapse`" in index
    assert "- NormLab 0.1.0 (git bbb222): `mean_spike_one_matrix_relu`" in index
