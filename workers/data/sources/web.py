"""Plain-HTTP downloads (UCI) and the minimal spreadsheet reading they need."""

from __future__ import annotations

import io
import re
import urllib.request
import zipfile
from xml.etree import ElementTree

__all__ = ["fetch_url", "read_xlsx_rows"]

_SHEET_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_USER_AGENT = "normlab-data/0.1 (+https://github.com/)"


def fetch_url(url: str, *, timeout_s: float = 60.0) -> bytes:
    """GET a URL and return its body; raises urllib's errors on failure."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.read()


def _column_index(cell_ref: str) -> int:
    letters = re.match(r"[A-Z]+", cell_ref)
    if letters is None:
        raise ValueError(f"bad cell reference {cell_ref!r}")
    index = 0
    for letter in letters.group(0):
        index = index * 26 + (ord(letter) - ord("A") + 1)
    return index - 1


def read_xlsx_rows(data: bytes) -> list[list[str | float | None]]:
    """Cell values of the first worksheet of an .xlsx file, row by row.

    Only what a data table needs: numbers, shared and inline strings. Written against the Office Open XML
    layout so the project needs no spreadsheet library just to read UCI's ENB2012_data.xlsx.
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        shared: list[str] = []
        if "xl/sharedStrings.xml" in names:
            root = ElementTree.fromstring(archive.read("xl/sharedStrings.xml"))
            for item in root.iter(f"{_SHEET_NS}si"):
                shared.append("".join(node.text or "" for node in item.iter(f"{_SHEET_NS}t")))
        sheets = sorted(
            (name for name in names if re.fullmatch(r"xl/worksheets/sheet\d+\.xml", name)),
            key=lambda name: int(re.findall(r"\d+", name)[-1]),
        )
        if not sheets:
            raise ValueError("no worksheet in the .xlsx file")
        sheet = ElementTree.fromstring(archive.read(sheets[0]))
    rows: list[list[str | float | None]] = []
    for row in sheet.iter(f"{_SHEET_NS}row"):
        cells: dict[int, str | float | None] = {}
        for position, cell in enumerate(row.findall(f"{_SHEET_NS}c")):
            column = _column_index(cell.get("r", "")) if cell.get("r") else position
            kind = cell.get("t")
            value_node = cell.find(f"{_SHEET_NS}v")
            value: str | float | None
            if kind == "inlineStr":
                value = "".join(node.text or "" for node in cell.iter(f"{_SHEET_NS}t"))
            elif value_node is None or value_node.text is None:
                value = None
            elif kind == "s":
                value = shared[int(value_node.text)]
            elif kind in ("str", "e"):
                value = value_node.text
            else:
                value = float(value_node.text)
            cells[column] = value
        width = max(cells, default=-1) + 1
        rows.append([cells.get(column) for column in range(width)])
    return rows
