"""The committed index, reports/README.md, is current: it was written against this tree's check code and
catalog, and it marks as stale exactly the committed reports whose recorded fingerprint differs from
this tree's (or which recorded none), each with the right reason. Changing the check code, a claim's
catalog entry or a spec without rebuilding the index (`scripts/run_catalog.py --index-only`) fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from studies.catalog import claim_ids, spec_path
from studies.catalog.fingerprint import check_code_hash, claim_fingerprint, staleness

REPORTS = Path(__file__).resolve().parents[2] / "reports"
INDEX = REPORTS / "README.md"
REBUILD = "rebuild it: .venv/bin/python scripts/run_catalog.py --size {size} --output reports/ --index-only"
ROW_CLAIM = re.compile(r"\(`([a-z0-9_]+)`\)")


@pytest.fixture(scope="module")
def index() -> str:
    return INDEX.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def size(index: str) -> str:
    match = re.search(r"^# NormLab catalog reports \((\w+) size\)$", index, re.MULTILINE)
    assert match, "reports/README.md has no title naming its size"
    return match.group(1)


def _fingerprint_cells(index: str) -> dict[str, str]:
    """claim -> its row's fingerprint cell, from every table of the index."""
    cells: dict[str, str] = {}
    column = None
    for line in index.splitlines():
        if line.startswith("|---"):
            continue  # the header's rule
        if not line.startswith("| "):
            column = None
            continue
        cells_of_line = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells_of_line[0] == "claim":
            assert "fingerprint" in cells_of_line, (
                f"a table of reports/README.md has no fingerprint column: {line}"
            )
            column = cells_of_line.index("fingerprint")
        elif column is not None and (claim := ROW_CLAIM.search(cells_of_line[0])):
            cells[claim.group(1)] = cells_of_line[column]
    return cells


def _stale_section(index: str) -> dict[str, str]:
    """claim -> the reason the index's "Stale reports" section gives for it."""
    assert "## Stale reports:" in index, "reports/README.md has no section of stale reports"
    section = index.split("## Stale reports:", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for line in section.splitlines():
        if line.startswith("- "):
            reason, claims = line[2:].rsplit(": ", 1)
            listed |= {claim: reason for claim in re.findall(r"`([a-z0-9_]+)`", claims)}
    return listed


def _expected(size: str) -> dict[str, tuple[str, str | None]]:
    """claim -> (this tree's claim fingerprint, why its committed report is stale or None)."""
    check_code = check_code_hash()
    expected = {}
    for claim in claim_ids():
        stored = REPORTS / f"{claim}.json"
        if not stored.is_file() or not spec_path(claim, size).is_file():
            continue  # the index lists no report where the catalog has no study at this size
        report = json.loads(stored.read_text(encoding="utf-8"))
        current = claim_fingerprint(claim, spec_path(claim, size), check_code=check_code)
        expected[claim] = (
            current.claim,
            staleness((report.get("provenance") or {}).get("fingerprint"), current),
        )
    return expected


def test_the_index_was_written_against_this_trees_check_code(index, size):
    assert f"Check code fingerprint: `{check_code_hash()}`" in index, (
        "the check code changed since reports/README.md was written; " + REBUILD.format(size=size)
    )


def test_every_committed_report_is_marked_current_or_stale_as_this_tree_judges_it(index, size):
    expected = _expected(size)
    assert expected, "no committed report to check"
    cells = _fingerprint_cells(index)
    reported = {claim for claim, cell in cells.items() if cell != "–"}
    assert reported == set(expected), REBUILD.format(size=size)
    wrong = []
    for claim, (fingerprint, reason) in expected.items():
        cell = cells[claim]
        marked_right = cell.startswith(f"**stale** ({reason})") if reason else cell.startswith("current")
        if not marked_right or f"`{fingerprint[:12]}`" not in cell:
            wrong.append(
                f"{claim}: the index says {cell!r}; this tree: {reason or 'current'} ({fingerprint[:12]})"
            )
    assert not wrong, "\n".join([*wrong, REBUILD.format(size=size)])


def test_the_stale_section_lists_exactly_the_stale_reports_and_why(index, size):
    stale = {claim: reason for claim, (_, reason) in _expected(size).items() if reason}
    assert _stale_section(index) == stale, REBUILD.format(size=size)
    assert f"## Stale reports: {len(stale)} of {len(_expected(size))}" in index
