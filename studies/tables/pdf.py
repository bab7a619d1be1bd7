"""A figure's SVG as a one-page PDF of the same size, for a paper.

svglib reads the SVG into a ReportLab drawing and ReportLab writes the PDF: pure Python and wheels, no
system library (cairo is not on a slim image). Sizes follow CSS: 1 px of the SVG is 0.75 pt of the PDF.

Text is set in DejaVu Sans from the font files matplotlib ships (matplotlib itself is not imported),
registered for the first family the figures name (studies.tables.svg.FONT; svglib, like a browser, takes
the first family it has), so a PDF looks the same on every machine: left to itself svglib asks the
system's fontconfig, and where there is none falls back to Helvetica, which has no Δ, −, ← or ρ. The PDF
is invariant (no creation time, a fixed id): one figure gives the same bytes every time.
"""

from __future__ import annotations

import importlib.util
import io
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from studies.tables.svg import FONT

if TYPE_CHECKING:
    from reportlab.graphics.shapes import Drawing
    from svglib.fonts import FontMap

__all__ = ["svg_drawing", "svg_to_pdf"]

# (weight, style) as the figures write them -> the DejaVu Sans file for it. svglib looks a font up by the
# weight's own word, so each weight the figures use is listed.
_FACES = {
    ("normal", "normal"): "DejaVuSans.ttf",
    ("bold", "normal"): "DejaVuSans-Bold.ttf",
    ("600", "normal"): "DejaVuSans-Bold.ttf",
    ("700", "normal"): "DejaVuSans-Bold.ttf",
    ("normal", "italic"): "DejaVuSans-Oblique.ttf",
    ("bold", "italic"): "DejaVuSans-BoldOblique.ttf",
    ("600", "italic"): "DejaVuSans-BoldOblique.ttf",
    ("700", "italic"): "DejaVuSans-BoldOblique.ttf",
}


def svg_to_pdf(svg: str, *, title: str | None = None) -> bytes:
    """The PDF of `svg` (an <svg> element with the SVG namespace), its page the SVG's width and height."""
    from reportlab.graphics import renderPDF
    from reportlab.pdfgen.canvas import Canvas

    drawing = svg_drawing(svg)
    buffer = io.BytesIO()
    canvas = Canvas(buffer, pagesize=(drawing.width, drawing.height), invariant=1)
    if title:
        canvas.setTitle(title)
    canvas.setCreator("NormLab")
    renderPDF.draw(drawing, canvas, 0, 0)
    canvas.showPage()
    canvas.save()
    return buffer.getvalue()


def svg_drawing(svg: str) -> Drawing:
    """The ReportLab drawing svglib reads from `svg`; ValueError when it reads none."""
    from svglib.svglib import svg2rlg

    drawing = svg2rlg(io.BytesIO(svg.encode("utf-8")), font_map=_font_map())
    if drawing is None:
        raise ValueError("svglib could not read the figure's SVG")
    return drawing


@cache
def _font_map() -> FontMap:
    """svglib's fonts for the figures: DejaVu Sans for each weight and style of their first family."""
    from svglib.fonts import FontMap

    folder = _matplotlib_fonts()
    fonts = FontMap()
    for (weight, style), file in _FACES.items():
        fonts.register_font(
            _first_family(), str(folder / file), weight=weight, style=style, rlgFontName=f"NormLab{file[:-4]}"
        )
    return fonts


def _first_family() -> str:
    """The first family of the figures' font-family attribute ("system-ui")."""
    match = re.search(r'font-family="([^",]*)', FONT)
    assert match is not None, "studies.tables.svg.FONT names the figures' font families"
    return match.group(1).strip()


def _matplotlib_fonts() -> Path:
    # The package's folder without importing it (that takes most of a second).
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or spec.origin is None:
        raise RuntimeError("the PDF figures need matplotlib's DejaVu Sans: pip install matplotlib")
    return Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf"
