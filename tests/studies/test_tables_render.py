"""Results-table renderers: JSON, CSV, markdown, self-contained HTML and the rich table."""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser

from rich.console import Console
from rich.table import Table

from studies.tables import (
    CSV_COLUMNS,
    TrialRecord,
    build_results_table,
    to_csv,
    to_html,
    to_json,
    to_markdown,
)

from .test_records import cifar_records, records_for

PAPER = {"autonorm_s": 0.8635, "frozen_ln": 0.8297}


def cifar_table(**options):
    return build_results_table(
        cifar_records(), dataset="cifar10", metric="accuracy", higher_is_better=True, **options
    )


def edge_case_table():
    records = (
        records_for("frozen_ln", [0.83, 0.84, 0.82])
        + records_for("one_seed", [0.85])
        + records_for("all_failed", [None, None])
        + records_for("identical", [0.83, 0.84, 0.82])
    )
    return build_results_table(records, dataset="tiny", metric="accuracy", higher_is_better=True)


def test_json_is_plain_json_with_none_for_undefined_numbers() -> None:
    data = edge_case_table().to_json()
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text) == data
    all_failed = next(row for row in data["rows"] if row["method"] == "all_failed")
    assert all_failed["mean"] is None and all_failed["ci_low"] is None and all_failed["n"] == 0


def test_module_level_renderers_match_the_table_methods() -> None:
    table = cifar_table()
    assert to_json(table) == table.to_json()
    assert to_csv(table) == table.to_csv()
    assert to_markdown(table) == table.to_markdown()
    assert to_html(table) == table.to_html()


def test_csv_has_the_json_keys_as_columns_and_one_line_per_row() -> None:
    table = cifar_table()
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [r["method"] for r in rows] == ["frozen_ln", "autonorm_s", "dyt", "film"]
    autonorm = rows[1]
    json_row = table.to_json()["rows"][1]
    assert float(autonorm["mean"]) == json_row["mean"]  # full precision survives
    assert float(autonorm["p_adjusted"]) == json_row["p_adjusted"]
    assert autonorm["verdict"] == "better"
    assert autonorm["per_seed"].startswith("0=")
    assert autonorm["mlflow_run_ids"].split(";")[0] == "autonorm_s--0"
    assert rows[0]["p_value"] == "" and rows[0]["is_reference"] == "true"


def test_markdown_has_a_header_row_per_column_and_a_row_per_method() -> None:
    md = cifar_table().to_markdown()
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| method"))
    assert "p adj. (holm)" in header and "verdict" in header and "Δ vs frozen_ln" in header
    assert "paper" not in header
    table_lines = [line for line in lines if line.startswith("| ") and not line.startswith("| method")]
    assert len(table_lines) == 4
    better = next(line for line in table_lines if line.startswith("| autonorm_s"))
    assert "| better |" in better and "paired t-test" in better
    assert "higher is better" in md and "Holm" in md


def test_markdown_shows_the_paper_column_only_when_paper_numbers_are_given() -> None:
    md = cifar_table(paper_values=PAPER).to_markdown()
    header = next(line for line in md.splitlines() if line.startswith("| method"))
    assert header.rstrip(" |").endswith("paper")
    assert "0.8635" in md


def test_markdown_lists_warnings_and_provenance_and_escapes_pipes() -> None:
    records = [
        *records_for("frozen_ln", [0.8, 0.81, 0.82]),
        TrialRecord("s|1", "odd|name", 0, 0.8, "succeeded", "run-x"),
    ]
    md = build_results_table(records, dataset="d", metric="accuracy", higher_is_better=True).to_markdown()
    assert "odd\\|name" in md and "s\\|1" in md
    assert "**Warnings**" in md and "run-x" in md


def test_html_is_a_self_contained_page_without_external_assets_or_scripts() -> None:
    page = cifar_table(paper_values=PAPER).to_html()
    assert page.startswith("<!DOCTYPE html>")
    assert "<style>" in page
    # The one link names no file: it stops the browser asking the server for a favicon.
    lowered = page.lower().replace('<link rel="icon" href="data:,">', "")
    for forbidden in ("http://", "https://", "<script", "<link", "@import", "src="):
        assert forbidden not in lowered


def test_html_colours_the_verdict_cells() -> None:
    page = cifar_table().to_html()
    assert '<td class="verdict better">better</td>' in page
    assert '<td class="verdict worse">worse</td>' in page
    assert '<td class="verdict reference">reference</td>' in page
    assert '<td class="verdict nsd">no significant difference</td>' in page
    assert "td.better" in page and "td.worse" in page  # the colours are defined inline


class _TableCounter(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.body_rows = 0
        self.in_tbody = False
        self.mismatched = 0

    def handle_starttag(self, tag, attrs) -> None:
        if tag in ("meta", "input", "link"):  # void elements: no end tag
            return
        self.open.append(tag)
        self.in_tbody |= tag == "tbody"
        self.body_rows += tag == "tr" and self.in_tbody

    def handle_endtag(self, tag) -> None:
        if not self.open or self.open.pop() != tag:
            self.mismatched += 1
        if tag == "tbody":
            self.in_tbody = False


def test_html_is_well_formed_with_one_body_row_per_method() -> None:
    counter = _TableCounter()
    counter.feed(edge_case_table().to_html())
    assert counter.mismatched == 0 and counter.open == []
    assert counter.body_rows == 4


def test_html_puts_the_decisive_columns_first_and_the_rest_behind_the_every_column_toggle() -> None:
    page = edge_case_table().to_html()
    head = page.split("<thead><tr>", 1)[1].split("</tr>", 1)[0]
    shown = re.findall(r"<th(?: class=\"label\")?>([^<]*)</th>", head)
    assert shown[0] == "method" and shown.index("verdict") < len(shown)
    assert [h for h in shown if "Δ" in h or h.startswith("p adj")] and "effect size" not in shown
    more = re.findall(r'<th class="more">([^<]*)</th>', head)
    assert "effect size" in more and "P(improve)" in more and "MDE 80 %" in more and "p" in more
    assert head.index('class="more"') > head.index(">verdict<")  # behind the decisive ones
    assert '<input type="checkbox" id="every-column">' in page
    assert "#every-column:not(:checked) ~ table .more { display: none; }" in page


def test_html_escapes_names_and_shows_warnings_and_run_ids() -> None:
    records = [
        *records_for("frozen_ln", [0.8, 0.81]),
        TrialRecord("s1", "<b>x</b>", 0, 0.8, "succeeded", "run-<1>"),
    ]
    page = build_results_table(records, dataset="d&d", metric="accuracy", higher_is_better=True).to_html()
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "run-&lt;1&gt;" in page and "d&amp;d" in page
    assert "warning: only 1 seed(s)" in page


def test_rich_table_has_the_same_columns_and_prints_every_method_and_verdict() -> None:
    table = cifar_table(paper_values=PAPER)
    rich_table = table.to_rich()
    assert isinstance(rich_table, Table)
    headers = [column.header for column in rich_table.columns]
    assert (
        headers[0] == "method" and "verdict" in headers and "paper" in headers and headers[-1] == "warnings"
    )
    console = Console(record=True, width=400, color_system=None)
    console.print(rich_table)
    text = console.export_text()
    for row in table.rows:
        assert row.method in text and row.verdict in text


def test_rich_table_spells_out_warnings_in_the_caption() -> None:
    console = Console(record=True, width=400, color_system=None)
    console.print(edge_case_table().to_rich())
    text = console.export_text()
    assert "all_failed: no completed seeds" in text


def test_numbers_use_one_number_of_decimals_per_table() -> None:
    percent = build_results_table(
        records_for("frozen_ln", [82.97, 83.10, 82.80]), dataset="d", metric="accuracy", higher_is_better=True
    ).to_markdown()
    assert "| 82.96 |" in percent  # four significant digits of a percentage
    fraction = cifar_table().to_markdown()
    assert "| 0.8300 |" in fraction


def test_in_a_1280_px_window_the_html_table_needs_no_sideways_scroll_until_every_column_is_asked_for(
    chromium, tmp_path
) -> None:
    page_file = tmp_path / "results.html"
    page_file.write_text(edge_case_table().to_html(), encoding="utf-8")
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(page_file.as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        narrow = page.evaluate("document.querySelector('table').scrollWidth")
        page.check("#every-column")
        assert page.evaluate("document.querySelector('table').scrollWidth") > narrow  # the rest came back
    finally:
        page.close()


def test_latex_is_a_booktabs_table_of_the_decisive_columns_with_the_statistics_as_its_caption() -> None:
    table = edge_case_table()
    latex = table.to_latex()
    assert latex.count(r"\begin{table}") == 1 and r"\toprule" in latex and r"\bottomrule" in latex
    header = latex.split(r"\toprule", 1)[1].split(r"\midrule", 1)[0]
    assert header.startswith("\nmethod & ") and "verdict" in header
    assert "effect size" not in header and "P(improve)" not in header  # behind the HTML toggle too
    body = latex.split(r"\midrule", 1)[1].split(r"\bottomrule", 1)[0].strip().splitlines()
    assert len(body) == len(table.rows) and all(line.endswith(r" \\") for line in body)
    assert r"$\Delta$" in header and "Δ" not in latex.split("%", 1)[1].split("\n", 1)[1]
    assert r"\caption{" in latex and r"\label{tab:normlab-" in latex


def test_latex_escapes_what_latex_would_read_as_commands():
    from studies.tables.render_latex import latex_escape

    assert latex_escape(r"a_b & 50% {x} #1 $y ~ ^\ ") == (
        r"a\_b \& 50\% \{x\} \#1 \$y \textasciitilde{} \textasciicircum{}\textbackslash{} "
    )
