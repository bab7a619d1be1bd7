"""The forest plot: an inline SVG of each row's mean and its difference from the reference."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from itertools import pairwise

import pytest

from studies.tables import TrialRecord, build_results_table, forest_plot_svg

from .test_records import cifar_records, records_for


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


def plot(table) -> ET.Element:
    return ET.fromstring(forest_plot_svg(table))


def rows_of(svg: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-label"): g for g in svg.iter("g") if g.get("class") == "row"}


def with_class(element: ET.Element, css: str) -> list[ET.Element]:
    return [e for e in element.iter() if css in (e.get("class") or "").split()]


def circle_x(row: ET.Element, css: str) -> float:
    (circle,) = with_class(row, css)
    return float(circle.get("cx"))


def tick_values(svg: ET.Element, panel: str) -> list[float]:
    return [float(text.text.replace("−", "-")) for text in with_class(svg, f"{panel}-tick")]


def test_the_plot_is_well_formed_xml_with_one_group_per_table_row() -> None:
    table = cifar_table()
    svg = plot(table)
    assert svg.tag == "svg"
    assert list(rows_of(svg)) == [row.label for row in table.rows]


def test_every_row_with_a_finite_interval_gets_one_mean_bar_and_one_difference_bar() -> None:
    rows = rows_of(plot(cifar_table()))
    for label, row in rows.items():
        assert len(with_class(row, "mean-ci")) == 1, label
        expected_diff_bars = 0 if label == "frozen_ln" else 1  # the reference is not compared with itself
        assert len(with_class(row, "diff-ci")) == expected_diff_bars, label


def test_a_row_without_values_has_no_bar_and_says_insufficient_data() -> None:
    rows = rows_of(plot(edge_case_table()))
    failed = rows["all_failed"]
    assert with_class(failed, "mean-ci") == [] and with_class(failed, "mean") == []
    assert with_class(failed, "diff-ci") == [] and with_class(failed, "diff") == []
    notes = [e.text for e in with_class(failed, "note")]
    assert notes == ["insufficient data", "insufficient data"]


def test_a_single_seed_row_shows_its_mean_without_an_interval() -> None:
    one_seed = rows_of(plot(edge_case_table()))["one_seed"]
    assert len(with_class(one_seed, "mean")) == 1 and with_class(one_seed, "mean-ci") == []
    assert "no interval (n = 1)" in [e.text for e in with_class(one_seed, "note")]


def test_a_higher_mean_sits_further_right_and_its_bar_spans_its_interval() -> None:
    table = cifar_table()
    rows = rows_of(plot(table))
    by_mean = sorted(table.rows, key=lambda r: r.mean)
    xs = [circle_x(rows[r.label], "mean") for r in by_mean]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    for r in table.rows:
        (bar,) = with_class(rows[r.label], "mean-ci")
        x1, x2 = float(bar.get("x1")), float(bar.get("x2"))
        assert x1 < circle_x(rows[r.label], "mean") < x2


def test_differences_are_ordered_on_their_own_axis_too() -> None:
    table = cifar_table()
    rows = rows_of(plot(table))
    compared = sorted((r for r in table.rows if not r.is_reference), key=lambda r: r.diff_mean)
    xs = [circle_x(rows[r.label], "diff") for r in compared]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)


def test_the_zero_line_sits_between_a_negative_and_a_positive_difference() -> None:
    svg = plot(cifar_table())
    (zero,) = with_class(svg, "zero")
    x_zero = float(zero.get("x1"))
    assert zero.get("x1") == zero.get("x2")  # vertical
    rows = rows_of(svg)
    assert circle_x(rows["film"], "diff") < x_zero < circle_x(rows["autonorm_s"], "diff")


def test_the_reference_row_is_marked_in_the_label_and_on_the_zero_line() -> None:
    svg = plot(cifar_table())
    reference = rows_of(svg)["frozen_ln"]
    (label,) = with_class(reference, "label")
    assert label.text == "frozen_ln (reference)" and label.get("font-weight") == "700"
    (mark,) = with_class(reference, "reference-mark")
    (zero,) = with_class(svg, "zero")
    diamond_xs = [float(point.split(",")[0]) for point in mark.get("points").split()]
    assert min(diamond_xs) < float(zero.get("x1")) < max(diamond_xs)


def test_marks_take_the_colour_of_the_verdict_cells_in_the_html_table() -> None:
    table = cifar_table()
    page = table.to_html()
    rows = rows_of(plot(table))
    for verdict, css in [("better", "better"), ("worse", "worse"), ("no significant difference", "nsd")]:
        (row,) = [r for r in rows.values() if r.get("data-verdict") == verdict]
        cell_colour = re.search(rf"td\.{css} {{[^}}]*[^-]color: (#[0-9a-f]{{6}})", page).group(1)
        (dot,) = with_class(row, "mean")
        assert dot.get("fill") == cell_colour, verdict
        (bar,) = with_class(row, "diff-ci")
        assert bar.get("stroke") == cell_colour, verdict


def test_the_axes_name_the_metric_and_its_direction() -> None:
    higher = forest_plot_svg(cifar_table())
    assert "accuracy (higher is better)" in higher and "better →" in higher
    lower = forest_plot_svg(
        build_results_table(
            records_for("frozen_ln", [41.2, 40.8, 41.5]) + records_for("dyt", [40.1, 39.9, 40.4]),
            dataset="wikitext",
            metric="perplexity",
            higher_is_better=False,
        )
    )
    assert "perplexity (lower is better)" in lower and "← better" in lower


def perplexity_table():
    records = records_for("frozen_ln", [41.2, 40.8, 41.5, 41.0]) + records_for(
        "dyt", [44.0, 47.5, 42.0, 45.0]
    )
    return build_results_table(records, dataset="wikitext", metric="perplexity", higher_is_better=False)


@pytest.mark.parametrize("make_table", [cifar_table, perplexity_table], ids=["fractions", "perplexity"])
def test_ticks_are_evenly_spaced_nice_numbers_that_cover_every_interval(make_table) -> None:
    table = make_table()
    svg = plot(table)
    mean_ticks, diff_ticks = tick_values(svg, "mean"), tick_values(svg, "diff")
    for ticks in (mean_ticks, diff_ticks):
        assert 3 <= len(ticks) <= 9
        steps = {round(b - a, 12) for a, b in pairwise(ticks)}
        assert len(steps) == 1
        (step,) = steps
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mantissa, nice) for nice in (1, 2, 5)), step
    assert mean_ticks[0] <= min(r.ci_low for r in table.rows)
    assert mean_ticks[-1] >= max(r.ci_high for r in table.rows)
    assert 0.0 in diff_ticks
    compared = [r for r in table.rows if not r.is_reference]
    assert diff_ticks[0] <= min(r.diff_ci_low for r in compared)
    assert diff_ticks[-1] >= max(r.diff_ci_high for r in compared)


def test_labels_with_markup_characters_stay_well_formed_and_escaped() -> None:
    records = [
        *records_for("frozen_ln", [0.8, 0.81, 0.79]),
        *records_for("<b>x</b>", [0.82, 0.83, 0.81], group='tau="0.5" & <co>'),
        TrialRecord("s1", "a&b", 0, 0.8, "succeeded"),
    ]
    table = build_results_table(records, dataset="d&d", metric="acc<1>", higher_is_better=True)
    text = forest_plot_svg(table)
    svg = ET.fromstring(text)  # would raise on a stray < or &
    assert set(rows_of(svg)) == {"frozen_ln", '<b>x</b> [tau="0.5" & <co>]', "a&b"}
    assert "<b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text


def test_a_table_where_nothing_completed_still_draws_an_empty_plot() -> None:
    records = records_for("frozen_ln", [None, None]) + records_for("dyt", [None])
    svg = plot(build_results_table(records, dataset="d", metric="accuracy", higher_is_better=True))
    assert len(rows_of(svg)) == 2
    assert with_class(svg, "mean") == [] and with_class(svg, "mean-ci") == []
    assert len(with_class(svg, "zero")) == 1


def test_the_results_page_embeds_the_plot_above_the_table_without_urls_or_scripts() -> None:
    page = cifar_table().to_html()
    assert page.index("<svg") < page.index("<table>")
    assert page.count("<svg") == 1 and page.count("</svg>") == 1
    lowered = page.lower()
    for forbidden in ("http", "<script", "xlink", "<image", "src=", "@import"):
        assert forbidden not in lowered
    svg_text = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    assert svg_text == forest_plot_svg(cifar_table())
