"""A figure's SVG as a PDF for a paper (studies.tables.pdf): one page of the SVG's size, its text a real
text layer set in DejaVu Sans whatever fonts the machine has, the same bytes every time."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfReader

from studies.tables import build_results_table
from studies.tables.figures import results_figures
from studies.tables.pdf import svg_drawing, svg_to_pdf
from tests.studies.test_records import cifar_records

from .pdf_reading import PX_TO_PT, pdf_pages, svg_size


@pytest.fixture(scope="module")
def forest():
    table = build_results_table(cifar_records(), dataset="cifar10", metric="accuracy", higher_is_better=True)
    return results_figures(table)[0]


def test_the_pdf_is_one_page_the_size_of_the_svg(forest):
    pdf = svg_to_pdf(forest.svg)
    assert pdf.startswith(b"%PDF-")
    [(width, height, _)] = pdf_pages(pdf)
    svg_width, svg_height = svg_size(forest.svg)
    assert (width, height) == pytest.approx((svg_width * PX_TO_PT, svg_height * PX_TO_PT))


def test_the_drawing_svglib_reads_has_the_svgs_width_and_height(forest):
    drawing = svg_drawing(forest.svg)
    svg_width, svg_height = svg_size(forest.svg)
    assert (drawing.width, drawing.height) == pytest.approx((svg_width * PX_TO_PT, svg_height * PX_TO_PT))


def test_the_text_layer_has_the_rows_the_axes_and_the_symbols(forest):
    [(_, _, text)] = pdf_pages(svg_to_pdf(forest.svg))
    for label in ("frozen_ln (reference)", "autonorm_s", "dyt", "film", "accuracy (higher is better)"):
        assert label in text
    # Symbols Helvetica has no glyph for, which the embedded DejaVu Sans draws.
    assert "Δ accuracy vs frozen_ln" in text and "−0.01" in text and "better →" in text


def test_the_text_is_set_in_the_embedded_dejavu_sans_even_without_fontconfig(forest, monkeypatch):
    # svglib asks `fc-match` for a family it does not know; a slim image has none.
    monkeypatch.setattr("svglib.fonts.shutil.which", lambda _name: None)
    pdf = svg_to_pdf(forest.svg)
    assert b"DejaVuSans" in pdf and b"DejaVuSans-Bold" in pdf  # the titles are weight 600


def test_one_figure_gives_the_same_bytes_every_time_with_its_caption_as_title(forest):
    pdf = svg_to_pdf(forest.svg, title=forest.caption)
    assert pdf == svg_to_pdf(forest.svg, title=forest.caption)
    assert PdfReader(io.BytesIO(pdf)).metadata.title == forest.caption


def test_text_svglib_cannot_read_as_svg_is_a_value_error():
    with pytest.raises(ValueError, match="could not read"):
        svg_drawing("plain text")
