"""GET /results/{dataset}/figures/{name}.svg|.pdf: a figure of the results page as a file, by its id on the
page and with the page's own query; the page's export line links the table as Markdown and LaTeX and each
figure as SVG and PDF."""

from __future__ import annotations

import re
from html import unescape

import pytest

from tests.factories import add_final_trials, submit
from tests.service.api.routes.test_results_evidence import SPEC as EVIDENCE_SPEC
from tests.service.api.routes.test_results_evidence import _trial_with_history
from tests.service.api.routes.tuning_studies import tuned_study_of
from tests.studies.tables.pdf_reading import PX_TO_PT, pdf_pages, svg_size

ACCURACY = {"frozen_ln": [0.90, 0.91, 0.89], "dyt": [0.905, 0.90, 0.895], "autonorm_s": [0.95, 0.96, 0.94]}


@pytest.fixture
def study(client, app_engine) -> str:
    study_id = submit(client)
    add_final_trials(app_engine, study_id, ACCURACY)
    return study_id


@pytest.fixture
def study_with_histories(client, app_engine) -> str:
    study_id = submit(client, EVIDENCE_SPEC)
    for seed in range(3):
        _trial_with_history(app_engine, study_id, "autonorm", seed, gated=True)
        _trial_with_history(app_engine, study_id, "frozen_ln", seed, gated=False)
    return study_id


def test_the_forest_plot_is_an_svg_file(client, study):
    response = client.get("/results/digits/figures/forest_plot.svg")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.headers["content-disposition"] == 'inline; filename="digits_forest_plot.svg"'
    assert response.text.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="forest-plot"')
    assert response.text.rstrip().endswith("</svg>")


def test_the_forest_plot_is_a_one_page_pdf_of_the_svgs_size_with_its_text(client, study):
    svg = client.get("/results/digits/figures/forest_plot.svg").text
    response = client.get("/results/digits/figures/forest_plot.pdf")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"] == 'inline; filename="digits_forest_plot.pdf"'
    assert response.content.startswith(b"%PDF-")
    [(width, height, text)] = pdf_pages(response.content)
    svg_width, svg_height = svg_size(svg)
    assert (width, height) == pytest.approx((svg_width * PX_TO_PT, svg_height * PX_TO_PT))
    assert "frozen_ln (reference)" in text and "autonorm_s" in text and "Δ accuracy vs frozen_ln" in text


def test_a_figure_is_the_one_the_page_with_the_same_query_shows(client, study):
    query = f"study={study}&reference=dyt&confidence=0.9"
    svg = client.get(f"/results/digits/figures/forest_plot.svg?{query}").text
    assert "Δ accuracy vs dyt: mean and 90 % CI" in svg
    page = client.get(f"/results/digits?{query}&format=html").text
    assert svg.replace(' xmlns="http://www.w3.org/2000/svg"', "", 1) in page


def test_the_evidence_figures_are_served_by_their_ids_on_the_page(client, study_with_histories):
    page = client.get("/results/digits?format=html").text
    for name in ("gate_dyt_weight_heatmap_autonorm", "gate_entropy_by_layer", "final_metric_vs_init_rank"):
        assert f'id="{name}"' in page
        response = client.get(f"/results/digits/figures/{name}.svg")
        assert response.status_code == 200 and response.headers["content-type"] == "image/svg+xml"
    pdf = client.get("/results/digits/figures/gate_dyt_weight_heatmap_autonorm.pdf")
    assert pdf.status_code == 200 and len(pdf_pages(pdf.content)) == 1


def test_a_studys_tuning_figures_are_named_with_its_id(client, app_engine):
    study_id = tuned_study_of(client, app_engine)
    name = f"{study_id}_optimisation_history_autonorm_s"
    assert f'id="{name}"' in client.get("/results/digits?format=html").text
    response = client.get(f"/results/digits/figures/{name}.pdf")
    assert response.status_code == 200 and response.headers["content-type"] == "application/pdf"
    [(_, _, text)] = pdf_pages(response.content)
    assert "autonorm_s" in text


def test_an_unknown_figure_is_a_404_listing_the_pages_figures(client, study_with_histories):
    response = client.get("/results/digits/figures/forest.svg")
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert detail.startswith("unknown figure 'forest'; this results page has: forest_plot, ")
    assert "gate_dyt_weight_heatmap_autonorm" in detail and "final_metric_vs_init_rank" in detail


def test_an_unknown_format_is_a_422_at_the_path(client, study):
    response = client.get("/results/digits/figures/forest_plot.png")
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["path", "format"] and error["input"] == "png"


def test_the_tables_own_refusals_hold_for_its_figures(client, study):
    assert client.get("/results/nope/figures/forest_plot.svg").status_code == 404  # unknown dataset
    bad_reference = client.get("/results/digits/figures/forest_plot.svg?reference=nope")
    assert bad_reference.status_code == 422
    assert bad_reference.json()["detail"][0]["loc"] == ["query", "reference"]


def test_the_route_documents_both_media_types_and_its_errors(app):
    operation = app.openapi()["paths"]["/results/{dataset}/figures/{name}.{format}"]["get"]
    assert set(operation["responses"]) == {"200", "404", "422", "503"}
    assert set(operation["responses"]["200"]["content"]) == {"image/svg+xml", "application/pdf"}


def _export_links(page: str) -> dict[str, str]:
    """The export block's links: title -> URL."""
    line = re.search(r'<div class="export" id="export"[^>]*>(.*?)</div>', page, re.S)
    assert line, "the page has no export block"
    return {
        unescape(title): unescape(href)
        for href, title in re.findall(r'<a href="([^"]*)" title="([^"]*)">', line.group(1))
    }


def test_the_page_links_the_table_as_markdown_and_latex_and_each_figure_as_svg_and_pdf(
    client, study_with_histories
):
    query = f"study={study_with_histories}&confidence=0.9"
    page = client.get(f"/results/digits?{query}&format=html").text
    links = _export_links(page)
    assert links["the table as Markdown"] == f"/results/digits?{query}&format=md"
    assert links["the table as LaTeX"] == f"/results/digits?{query}&format=latex"
    assert links["forest_plot as SVG"] == f"/results/digits/figures/forest_plot.svg?{query}"
    assert links["forest_plot as PDF"] == f"/results/digits/figures/forest_plot.pdf?{query}"
    figure_ids = set(re.findall(r'<figure class="evidence" id="([^"]+)"', page))
    assert figure_ids and {f"{name} as SVG" for name in figure_ids} <= set(links)
    assert page.index('<nav class="back"') < page.index('id="export"') < page.index("<h1>")
    # One line for the table and the forest plot; the other figures folded beneath it.
    folded = page.split('id="export"', 1)[1].split("</div>", 1)[0].split("<details>", 1)[1]
    assert f"the page's other {len(figure_ids)} figure(s) as SVG or PDF" in folded
    assert "forest_plot" not in folded and all(name in folded for name in figure_ids)
    media = {
        "md": "text/markdown",
        "latex": "application/x-latex",
        "svg": "image/svg+xml",
        "pdf": "application/pdf",
    }
    for title in (
        "the table as Markdown",
        "the table as LaTeX",
        "forest_plot as SVG",
        "gate_entropy_by_layer as PDF",
    ):
        response = client.get(links[title])
        assert response.status_code == 200, (title, response.text[:200])
        fmt = re.search(r"format=(\w+)$|\.(\w+)\?", links[title])
        assert response.headers["content-type"].split(";")[0] == media[fmt.group(1) or fmt.group(2)]


def test_a_page_with_the_forest_plot_alone_folds_nothing(client, study):
    page = client.get("/results/digits?format=html").text
    assert set(_export_links(page)) == {
        "the table as Markdown",
        "the table as LaTeX",
        "forest_plot as SVG",
        "forest_plot as PDF",
    }
    assert "<details><summary>the page's other" not in page


def test_the_markdown_export_states_the_latex_caption_and_what_not_tested_means(client, app_engine):
    from tests.studies.store.sequential_study import add_sequential_study

    add_sequential_study(app_engine)
    add_final_trials(app_engine, submit(client), ACCURACY)
    markdown = client.get("/results/digits?study=all&format=md").text
    latex = client.get("/results/digits?study=all&format=latex").text
    caption = markdown.splitlines()[2]
    assert (
        "reference frozen_ln" in caption and "95 % intervals" in caption and "p adjusted by Holm" in caption
    )
    assert "seeds per row" in caption and "primary test: paired t-test" in caption
    assert "a comparison that pools its seeds with other studies' is not tested" in caption
    assert "not tested (sequential seeds)" in markdown  # the verdict the caption explains
    from studies.tables.render_latex import latex_escape

    assert f"\\caption{{{latex_escape(caption)}}}" in latex
