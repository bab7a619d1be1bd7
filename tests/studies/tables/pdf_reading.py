"""Reading a PDF figure back in the tests: its pages, each page's size in points and its text layer."""

from __future__ import annotations

import io
import re

from pypdf import PdfReader

__all__ = ["PX_TO_PT", "pdf_pages", "svg_size"]

PX_TO_PT = 0.75  # CSS: 96 px to the inch, 72 pt to the inch


def pdf_pages(pdf: bytes) -> list[tuple[float, float, str]]:
    """(width, height, text) of each page."""
    reader = PdfReader(io.BytesIO(pdf))
    return [
        (float(page.mediabox.width), float(page.mediabox.height), page.extract_text())
        for page in reader.pages
    ]


def svg_size(svg: str) -> tuple[float, float]:
    """The width and height attributes of the <svg> element, in px."""
    opening = svg.split(">", 1)[0]
    width = re.search(r'\swidth="([\d.]+)"', opening)
    height = re.search(r'\sheight="([\d.]+)"', opening)
    assert width and height, f"no size on {opening[:120]}"
    return float(width.group(1)), float(height.group(1))
