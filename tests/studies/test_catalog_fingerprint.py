"""studies.catalog.fingerprint: the hashes of what a verdict depends on (the check code, the claim's
catalog entry, its spec) are stable, change when any of those changes, ignore everything else, and say
why a report that recorded other ones is stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from studies.catalog import claim_ids, spec_path
from studies.catalog.fingerprint import (
    CHECK_CODE,
    NO_FINGERPRINT,
    SOURCE_ROOT,
    Fingerprint,
    check_code_files,
    check_code_hash,
    claim_fingerprint,
    staleness,
)

CHECK_FILES = {
    "studies/claims/difference.py": "def check():\n    return 'supported'\n",
    "studies/claims/sub/helper.py": "LEVEL = 0.1\n",
    "studies/report/judge.py": "def judge():\n    pass\n",
    "studies/stats/compare.py": "ALPHA = 0.05\n",
}
CLAIMS_YAML = """\
claims:
  - id: first
    check: {type: difference, margin: 0.01}
    notes: "the first claim"
  - id: second
    check: {type: trend}
"""
CONVERGENCE_YAML = """\
levels:
  digits: {at_least: 0.95, source: measured}
  mnist: {at_least: 0.98, source: chosen}
"""
SPEC = "name: first-cpu\ndataset: digits\nseeds: [0, 1, 2]\n"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    return root


@pytest.fixture
def catalog(tmp_path: Path) -> dict[str, Path]:
    files = {
        "claims": tmp_path / "claims.yaml",
        "convergence": tmp_path / "convergence.yaml",
        "spec": tmp_path / "first" / "cpu.yaml",
    }
    files["spec"].parent.mkdir()
    files["claims"].write_text(CLAIMS_YAML)
    files["convergence"].write_text(CONVERGENCE_YAML)
    files["spec"].write_text(SPEC)
    return files


def _fingerprint(catalog: dict[str, Path], claim: str = "first") -> Fingerprint:
    return claim_fingerprint(
        claim,
        catalog["spec"],
        check_code="c0de",
        claims_file=catalog["claims"],
        convergence_file=catalog["convergence"],
    )


# ---------------------------------------------------------------- the check code


def test_the_check_code_hash_is_stable_and_depends_on_paths_and_contents_only(tmp_path):
    first = check_code_hash(_tree(tmp_path / "a", CHECK_FILES))
    # the same files written in the other order, elsewhere, with Windows line endings
    crlf = {path: text.replace("\n", "\r\n") for path, text in reversed(list(CHECK_FILES.items()))}
    second = check_code_hash(_tree(tmp_path / "b", crlf))
    assert first == second == check_code_hash(tmp_path / "a")
    assert len(first) == 64 and int(first, 16) >= 0  # a sha256 in hex


@pytest.mark.parametrize(
    "change",
    [
        {"studies/claims/difference.py": "def check():\n    return 'contradicted'\n"},  # a check's code
        {"studies/claims/sub/helper.py": "LEVEL = 0.2\n"},  # a nested module
        {"studies/report/judge.py": "def judge():\n    return None\n"},
        {"studies/claims/new_check.py": ""},  # a new (even empty) module
    ],
)
def test_the_check_code_hash_changes_when_a_check_file_changes(tmp_path, change):
    before = check_code_hash(_tree(tmp_path, CHECK_FILES))
    assert check_code_hash(_tree(tmp_path, change)) != before


def test_moving_a_check_file_changes_the_hash(tmp_path):
    before = check_code_hash(_tree(tmp_path, CHECK_FILES))
    (tmp_path / "studies/claims/sub/helper.py").rename(tmp_path / "studies/claims/helper.py")
    assert check_code_hash(tmp_path) != before


def test_files_a_verdict_does_not_read_leave_the_check_code_hash_alone(tmp_path):
    before = check_code_hash(_tree(tmp_path, CHECK_FILES))
    unrelated = {
        "studies/tables/render.py": "WIDTH = 3\n",  # how a report prints, not what it decides
        "studies/report/render.py": "def to_markdown():\n    pass\n",
        "studies/claims/notes.txt": "not python\n",
        "models/rank.py": "def rank():\n    pass\n",
        "README.md": "# NormLab\n",
    }
    _tree(tmp_path, unrelated)
    pycache = tmp_path / "studies/claims/__pycache__/difference.cpython-310.pyc"
    pycache.parent.mkdir()
    pycache.write_bytes(b"\x00compiled")
    assert check_code_hash(tmp_path) == before


def test_the_check_code_is_every_check_module_and_the_judge():
    files = {path.relative_to(SOURCE_ROOT).as_posix() for path in check_code_files()}
    claims = {p.relative_to(SOURCE_ROOT).as_posix() for p in (SOURCE_ROOT / "studies/claims").glob("*.py")}
    assert claims and claims <= files
    assert {
        "studies/report/judge.py",
        "studies/convergence.py",
        "studies/stats/compare.py",
        "studies/evidence/mechanism.py",
    } <= files
    assert not any(f.startswith(("studies/tables/", "studies/report/render")) for f in files)
    assert all(pattern.startswith("studies/") for pattern in CHECK_CODE)


# ---------------------------------------------------------------- a claim's catalog entry and spec


def test_a_claims_fingerprint_is_stable(catalog):
    assert _fingerprint(catalog) == _fingerprint(catalog)
    assert _fingerprint(catalog).claim == _fingerprint(catalog).claim


def test_the_claims_spec_changes_the_spec_part_alone(catalog):
    before = _fingerprint(catalog)
    catalog["spec"].write_text(SPEC.replace("[0, 1, 2]", "[0, 1, 2, 3]"))
    after = _fingerprint(catalog)
    assert after.spec != before.spec
    assert (after.check_code, after.catalog_entry) == (before.check_code, before.catalog_entry)
    assert after.claim != before.claim
    assert staleness(before.to_json(), after) == "spec changed"


def test_the_claims_own_catalog_entry_changes_its_fingerprint(catalog):
    before = _fingerprint(catalog)
    catalog["claims"].write_text(CLAIMS_YAML.replace("margin: 0.01", "margin: 0.02"))
    after = _fingerprint(catalog)
    assert after.catalog_entry != before.catalog_entry
    assert staleness(before.to_json(), after) == "catalog entry changed"


def test_another_claims_entry_and_the_yaml_layout_do_not(catalog):
    before = _fingerprint(catalog)
    edited = CLAIMS_YAML.replace("check: {type: trend}", "check: {type: trend, alpha: 0.01}")
    edited = "# a comment about the catalog\n" + edited.replace(
        "{type: difference, margin: 0.01}", "{margin: 0.01, type: difference}"
    )
    catalog["claims"].write_text(edited)
    assert _fingerprint(catalog) == before


def test_the_convergence_level_of_the_specs_dataset_counts_and_no_other(catalog):
    before = _fingerprint(catalog)
    catalog["convergence"].write_text(CONVERGENCE_YAML.replace("0.98", "0.97"))  # mnist: not the spec's
    assert _fingerprint(catalog) == before
    catalog["convergence"].write_text(CONVERGENCE_YAML.replace("0.95", "0.9"))  # digits: the spec's dataset
    assert _fingerprint(catalog).catalog_entry != before.catalog_entry


def test_every_catalog_claim_has_a_fingerprint_at_every_size_it_runs():
    for claim in claim_ids():
        path = spec_path(claim, "cpu")
        fingerprint = claim_fingerprint(claim, path)
        assert fingerprint == claim_fingerprint(claim, path, check_code=check_code_hash())
        assert Fingerprint.from_json(fingerprint.to_json()) == fingerprint


# ---------------------------------------------------------------- staleness


def test_a_report_with_the_current_fingerprint_is_current(catalog):
    current = _fingerprint(catalog)
    assert staleness(current.to_json(), current) is None


@pytest.mark.parametrize("recorded", [None, {}, "abc", {"check_code": "c0de", "spec": "x"}, {"claim": "x"}])
def test_a_report_without_a_readable_fingerprint_predates_fingerprinting(catalog, recorded):
    assert (
        staleness(recorded, _fingerprint(catalog))
        == NO_FINGERPRINT
        == "no fingerprint: predates fingerprinting"
    )


def test_staleness_names_every_part_that_changed(catalog):
    current = _fingerprint(catalog)
    recorded = {"check_code": "old", "catalog_entry": "old", "spec": current.spec}
    assert staleness(recorded, current) == "check code changed; catalog entry changed"
