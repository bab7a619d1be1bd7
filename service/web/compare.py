"""Two studies side by side (`/compare?a=ID&b=ID`): what their specs set differently, and each one's own
results table, never pooled.

Passing two ids to /results pools their trials into one table, where a seed both studies ran counts once
(the later run's value); comparing two runs of an experiment (another learning rate, more epochs) needs
them apart. Each table is the study's own /results table (its reference, its tests), shown with the
decisive columns (studies.tables.columns).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from studies.tables.columns import SECONDARY_COLUMNS, display_cells, display_headers, formatter_for
from studies.tables.table import ResultsTable

__all__ = ["CompareSide", "ComparedTable", "SpecDifference", "compared_table", "spec_differences"]


@dataclass(frozen=True)
class SpecDifference:
    key: str  # dotted path into the spec, e.g. budget.epochs
    a: str  # the value in study a, as JSON ("–" where a does not set it)
    b: str


@dataclass(frozen=True)
class ComparedTable:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    verdict_column: int


@dataclass(frozen=True)
class CompareSide:
    id: str
    name: str
    status: str
    dataset: str
    page_url: str
    table: ComparedTable | None
    why_no_table: str | None  # why there is no table yet (no final trials), else None


_ABSENT = "–"


def _flatten(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def spec_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[SpecDifference]:
    """Every setting the two specs give differently (nested sections by dotted key; lists as a whole),
    in key order; `name` and `description` left out, as every study has its own."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    differences = []
    for key in sorted(set(flat_a) | set(flat_b)):
        if key in ("name", "description"):
            continue
        in_a, in_b = key in flat_a, key in flat_b
        if in_a and in_b and flat_a[key] == flat_b[key]:
            continue
        differences.append(
            SpecDifference(
                key=key,
                a=_shown(flat_a[key]) if in_a else _ABSENT,
                b=_shown(flat_b[key]) if in_b else _ABSENT,
            )
        )
    return differences


def compared_table(table: ResultsTable) -> ComparedTable:
    """The study's table with the decisive columns the HTML results page shows first."""
    fmt = formatter_for(table)
    headers = display_headers(table)
    shown = [i for i in range(len(headers)) if i not in SECONDARY_COLUMNS]
    rows = tuple(
        tuple(cells[i] for i in shown) for cells in (display_cells(table, fmt, row) for row in table.rows)
    )
    return ComparedTable(
        headers=tuple(headers[i] for i in shown),
        rows=rows,
        verdict_column=shown.index(headers.index("verdict")),
    )
