"""scripts/run_catalog.py's index, without a server: each report it writes records the claim's fingerprint;
the index marks every report whose fingerprint differs from this tree's (or which has none) as stale,
says why, and tallies stale verdicts apart from current ones; every tally counts claims and the
independent experiments (distinct studies) behind them."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from studies.catalog import spec_path
from studies.catalog.fingerprint import check_code_hash, claim_fingerprint

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "run_catalog.py"
CIFAR10_STUDY = ("cifar10_autonorm_s_beats_frozen_ln", "cifar10_stabilisation", "vision_gates_collapse_to_ln")
STAND_INS = "## Verdicts about stand-ins (about the stand-in dataset, not the paper's): "


@pytest.fixture(scope="module")
def run_catalog():
    spec = importlib.util.spec_from_file_location("run_catalog", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _report(claim: str, verdict: str, study_id: str, scope: str = "stand-in") -> dict[str, Any]:
    return {
        "study_id": study_id,
        "verdict": verdict,
        "scope": scope,
        "result": {},
        "provenance": {"normlab_version": "0.1.0", "git_revision": "abc123", "status": "succeeded"},
    }


def _store(folder: Path, claim: str, report: dict[str, Any]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{claim}.json").write_text(json.dumps(report), encoding="utf-8")


def _index(run_catalog, folder: Path, size: str = "cpu") -> str:
    assert run_catalog.main(["--index-only", "--size", size, "--output", str(folder)]) == 0
    return (folder / "README.md").read_text(encoding="utf-8")


def _row(index: str, claim: str) -> str:
    return next(line for line in index.splitlines() if line.startswith("| ") and f"(`{claim}`)" in line)


def test_a_tally_counts_claims_and_the_independent_experiments_behind_them(run_catalog, tmp_path):
    for claim in CIFAR10_STUDY:  # three readings of one training
        _store(
            tmp_path, claim, run_catalog.with_fingerprint(_report(claim, "contradicted", "s1"), claim, "cpu")
        )
    claim = "cifar10_c_robustness"
    _store(tmp_path, claim, run_catalog.with_fingerprint(_report(claim, "contradicted", "s2"), claim, "cpu"))
    claim = "svhn_adanorm_best"
    _store(tmp_path, claim, run_catalog.with_fingerprint(_report(claim, "inconclusive", "s3"), claim, "cpu"))
    index = _index(run_catalog, tmp_path)
    assert (
        STAND_INS + "4 contradicted (2 independent experiments), 1 inconclusive (1 independent experiment)\n"
    ) in index
    # the claims with no study at this size are no experiment at all
    assert "## Not tested (the experiment could not answer): " in index
    assert "not tested (no experiment)" in index


def test_a_report_written_by_the_runner_records_its_fingerprint_and_is_current(
    run_catalog, tmp_path, monkeypatch
):
    claim = "cifar10_stabilisation"  # reads the study of cifar10_autonorm_s_beats_frozen_ln
    served = _report(claim, "contradicted", "s1")
    served["provenance"]["git_revision"] = run_catalog.git_revision()
    texts = {"json": json.dumps(served), "md": "# the report\n", "html": "<h1>the report</h1>"}
    monkeypatch.setattr(run_catalog, "fetch_report", lambda _url, _id, fmt, claim: texts[fmt])
    run = run_catalog.ClaimRun(claim, study_id="s1", status="succeeded")
    run_catalog.write_reports("http://server", run, tmp_path, "cpu")

    written = json.loads((tmp_path / f"{claim}.json").read_text(encoding="utf-8"))
    expected = claim_fingerprint(claim, spec_path(claim, "cpu")).to_json()
    assert written["provenance"]["fingerprint"] == {**expected, "git_revision": run_catalog.git_revision()}
    assert written["verdict"] == "contradicted"  # the rest of the report as the server wrote it
    assert (tmp_path / f"{claim}.md").read_text(encoding="utf-8") == "# the report\n"

    index = _index(run_catalog, tmp_path)
    assert f"current `{expected['claim'][:12]}`" in _row(index, claim)
    assert STAND_INS + "1 contradicted (1 independent experiment)\n" in index
    assert "## Stale reports: 0 of 1" in index


def test_a_report_without_a_fingerprint_is_stale_and_tallied_apart(run_catalog, tmp_path):
    current, old = "cifar10_c_robustness", "svhn_adanorm_best"
    _store(
        tmp_path,
        current,
        run_catalog.with_fingerprint(_report(current, "contradicted", "s1"), current, "cpu"),
    )
    _store(tmp_path, old, _report(old, "inconclusive", "s2"))  # written before reports had fingerprints
    index = _index(run_catalog, tmp_path)

    assert (
        STAND_INS + "1 contradicted (1 independent experiment); "
        "stale (not counted as current): 1 inconclusive (1 independent experiment)\n"
    ) in index
    now = claim_fingerprint(old, spec_path(old, "cpu")).claim[:12]
    assert f"| **stale** (no fingerprint: predates fingerprinting): now `{now}` |" in _row(index, old)
    assert "## Stale reports: 1 of 2" in index
    assert f"- no fingerprint: predates fingerprinting: `{old}`\n" in index


def test_a_group_with_only_stale_verdicts_has_none_current(run_catalog, tmp_path):
    _store(tmp_path, "rank_post_norm_collapse", _report("rank_post_norm_collapse", "supported", "s1", "init"))
    index = _index(run_catalog, tmp_path)
    assert (
        "## Verdicts at initialisation (the claims hold on any input): none current; "
        "stale (not counted as current): 1 supported (1 independent experiment)"
    ) in index


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        ("check_code", "check code changed"),
        ("catalog_entry", "catalog entry changed"),
        ("spec", "spec changed"),
    ],
)
def test_a_report_judged_with_other_checks_catalog_or_spec_is_stale_and_says_which(
    run_catalog, tmp_path, part, reason
):
    claim = "svhn_adanorm_best"
    report = run_catalog.with_fingerprint(_report(claim, "inconclusive", "s1"), claim, "cpu")
    report["provenance"]["fingerprint"][part] = "0" * 64  # what the tree was when the report was written
    _store(tmp_path, claim, report)
    index = _index(run_catalog, tmp_path)
    row = _row(index, claim)
    assert f"| **stale** ({reason}): recorded `" in row
    assert f"- {reason}: `{claim}`\n" in index
    assert STAND_INS + "none current; stale (not counted as current): 1 inconclusive" in index


def test_the_index_records_the_commit_and_the_check_code_fingerprint(run_catalog, tmp_path):
    claim = "svhn_adanorm_best"
    _store(tmp_path, claim, _report(claim, "inconclusive", "s1"))
    index = _index(run_catalog, tmp_path)
    assert f"Indexed at git {run_catalog.git_revision()}." in index
    assert f"Check code fingerprint: `{check_code_hash()}`" in index
    assert "Every report here came from NormLab 0.1.0 (git abc123)." in index  # the commit it ran at


def test_a_claim_without_a_report_has_no_fingerprint_to_be_stale(run_catalog, tmp_path):
    tmp_path.mkdir(exist_ok=True)
    index = _index(run_catalog, tmp_path)
    row = _row(index, "cifar100_autonorm_s_beats_frozen_ln")
    assert row.endswith("| – | – |")  # the fingerprint and report columns
    assert "## Stale reports: 0 of 0" in index


def test_rejudging_fetches_the_same_studys_report_again_and_keeps_where_it_was_trained(
    run_catalog, tmp_path, monkeypatch
):
    claim = "cifar10_stabilisation"
    trained = run_catalog.with_fingerprint(_report(claim, "inconclusive", "s1"), claim, "cpu")
    trained["provenance"]["fingerprint"]["check_code"] = "0" * 64  # judged with other check code
    _store(tmp_path, claim, trained)
    served = _report(claim, "contradicted", "s1")
    served["provenance"]["git_revision"] = run_catalog.git_revision()
    asked: list[str] = []

    def fetch(_url, study_id, fmt, claim):
        asked.append(study_id)
        return {"json": json.dumps(served), "md": "# again\n", "html": "<h1>again</h1>"}[fmt]

    monkeypatch.setattr(run_catalog, "fetch_report", fetch)
    monkeypatch.setattr(run_catalog, "read_api_token", lambda _settings: "token")
    monkeypatch.setattr(run_catalog, "submit", lambda *a: pytest.fail("re-judging submits nothing"))
    code = run_catalog.main(["--rejudge", "--claim", claim, "--size", "cpu", "--output", str(tmp_path)])
    assert code == 0 and set(asked) == {"s1"}
    written = json.loads((tmp_path / f"{claim}.json").read_text(encoding="utf-8"))
    assert written["verdict"] == "contradicted"  # this tree's judgement of the same trials
    assert written["provenance"]["trained_at_git_revision"] == "abc123"
    assert "## Stale reports: 0 of 1" in (tmp_path / "README.md").read_text(encoding="utf-8")


def test_a_study_that_trained_another_spec_is_not_rejudged(run_catalog, tmp_path, monkeypatch):
    claim = "cifar10_stabilisation"
    trained = run_catalog.with_fingerprint(_report(claim, "inconclusive", "s1"), claim, "cpu")
    trained["provenance"]["fingerprint"]["spec"] = "0" * 64
    _store(tmp_path, claim, trained)
    monkeypatch.setattr(run_catalog, "fetch_report", lambda *a, **k: pytest.fail("no report is fetched"))
    monkeypatch.setattr(run_catalog, "read_api_token", lambda _settings: "token")
    run_catalog.main(["--rejudge", "--claim", claim, "--size", "cpu", "--output", str(tmp_path)])
    assert json.loads((tmp_path / f"{claim}.json").read_text(encoding="utf-8"))["verdict"] == "inconclusive"
