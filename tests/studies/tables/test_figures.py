"""The figures of a results page by name (studies.tables.figures): the forest plot always first, each
figure a standalone SVG file, and a name the page does not have refused with the names it does."""

from __future__ import annotations

import pytest

from studies.tables import build_results_table
from studies.tables.figures import FOREST_PLOT, UnknownFigureError, find_figure, results_figures
from studies.tables.render_svg import forest_plot_svg
from tests.studies.test_records import cifar_records


@pytest.fixture(scope="module")
def table():
    return build_results_table(cifar_records(), dataset="cifar10", metric="accuracy", higher_is_better=True)


def test_a_table_alone_has_its_forest_plot_as_a_standalone_svg(table):
    [forest] = results_figures(table)
    assert forest.name == FOREST_PLOT == "forest_plot"
    assert forest.svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="forest-plot"')
    assert forest.svg.replace(' xmlns="http://www.w3.org/2000/svg"', "", 1) == forest_plot_svg(table)
    assert forest.caption.startswith("cifar10: accuracy (higher is better)") and "frozen_ln" in forest.caption


def test_a_figure_is_found_by_its_name(table):
    figures = results_figures(table)
    assert find_figure(figures, "forest_plot") is figures[0]


def test_an_unknown_name_is_refused_with_the_names_the_page_has(table):
    with pytest.raises(UnknownFigureError) as raised:
        find_figure(results_figures(table), "forest")
    assert raised.value.known == ("forest_plot",)
    assert str(raised.value) == "unknown figure 'forest'; this results page has: forest_plot"
