"""A stand-in dataset's results say, in every rendering's header, what it stands in for and what it is."""

from __future__ import annotations

from html import escape

from studies.tables import TrialRecord, build_results_table
from studies.tables.dataset_notes import DATASET_NOTES, dataset_note

RECORDS = [
    TrialRecord(study_id="s", method=method, seed=seed, value=value, status="succeeded")
    for method, base in (("frozen_ln", 0.90), ("dyt", 0.92))
    for seed, value in enumerate((base, base + 0.01, base - 0.01))
]


def _table(dataset: str):
    return build_results_table(
        RECORDS, dataset=dataset, metric="accuracy", higher_is_better=True, dataset_note=dataset_note(dataset)
    )


def test_stand_in_header_names_the_paper_dataset_and_what_the_data_is_in_every_format() -> None:
    table = _table("digits")
    note = "stand-in for mnist: scikit-learn's 1,797 real 8x8 handwritten digits."
    assert table.dataset_note == note == DATASET_NOTES["digits"]
    assert table.to_json()["dataset_note"] == note
    markdown = table.to_markdown().splitlines()
    assert markdown[0] == "### digits: accuracy"
    assert markdown[2].startswith(f"digits is a {note} digits: accuracy (higher is better)")
    html = table.to_html()
    assert f'<p class="caption">digits is a {escape(note)}' in html
    assert f"digits is a {note}" in str(table.to_rich().caption)


def test_licensed_paper_data_is_named_for_the_ptb_pos_stand_in() -> None:
    note = _table("ptb_pos").to_json()["dataset_note"]
    assert note.startswith(
        "stand-in for ptb_wsj_pos (the Penn Treebank-3 WSJ part-of-speech corpus, LDC99T42"
    )
    assert "batterydata/pos_tagging" in note and "CoNLL-2003" in note


def test_the_papers_own_datasets_carry_no_note() -> None:
    for dataset in ("cifar10", "mnist", "cifar10_c_hendrycks", "sst2"):
        table = _table(dataset)
        assert table.dataset_note is None and table.to_json()["dataset_note"] is None
        assert "stand-in" not in table.to_markdown()
