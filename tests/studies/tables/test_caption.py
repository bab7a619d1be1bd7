"""A results table's caption, the statistics behind its numbers, is one text (studies.tables.columns.
table_caption): the markdown states it as the paragraph under its heading and the LaTeX as its \\caption,
escaped, so a table exported for a paper in either format says the same."""

from __future__ import annotations

from studies.tables import build_results_table
from studies.tables.columns import table_caption
from studies.tables.render_latex import latex_escape
from tests.studies.test_records import cifar_records, records_for


def _table(records, **options):
    return build_results_table(
        records, dataset="cifar10", metric="accuracy", higher_is_better=True, **options
    )


def _markdown_caption(markdown: str) -> str:
    heading, blank, caption, *_ = markdown.splitlines()
    assert heading.startswith("### ") and blank == ""
    return caption


def test_the_markdown_and_latex_captions_are_the_same_statement():
    table = _table(cifar_records())
    caption = table_caption(table)
    assert _markdown_caption(table.to_markdown()) == caption
    assert f"\\caption{{{latex_escape(caption)}}}" in table.to_latex()


def test_the_caption_states_the_reference_seeds_interval_adjustment_and_test():
    caption = table_caption(_table(cifar_records(), confidence=0.9, adjustment="bh"))
    assert "reference frozen_ln" in caption
    assert "6 seeds per row" in caption
    assert "90 % intervals" in caption
    assert "p adjusted by Benjamini-Hochberg across 3 comparison(s)" in caption
    assert "primary test: paired t-test on shared seeds (Wilcoxon signed-rank beside it)" in caption


def test_rows_with_failed_or_missing_seeds_say_what_was_done_of_what_was_planned():
    records = records_for("frozen_ln", [0.83, 0.84, 0.82]) + records_for("dyt", [0.85, None, 0.84])
    assert "seeds per row: 2 to 3 done of 3 planned" in table_caption(_table(records))


def test_one_seed_is_one_seed():
    records = records_for("frozen_ln", [0.83]) + records_for("dyt", [0.85])
    assert "1 seed per row" in table_caption(_table(records))
