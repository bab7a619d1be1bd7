"""The results table for a narrow terminal: the decisive columns only, wrapped, never cut.

The API's markdown table has every column (per-seed values, bootstrap intervals, effect sizes); in an
80-column terminal its cells were cut to `0.8…`. Below WIDE_COLUMNS the CLI prints this instead, from the
JSON rendering: method, seeds, mean and interval, difference from the reference and its interval, the
(Holm-adjusted) p-value and the verdict, then each row's warnings in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

__all__ = ["WIDE_COLUMNS", "narrow_results"]

WIDE_COLUMNS = 160  # the markdown table reads without cut cells from about this width


def _number(value: Any) -> str:
    return "–" if value is None else f"{value:.4g}"


def _signed(value: Any) -> str:
    return "–" if value is None else f"{value:+.4g}"


def _interval(low: Any, high: Any, *, signed: bool = False) -> str:
    if low is None or high is None:
        return ""
    show = _signed if signed else _number
    return f"[{show(low)}, {show(high)}]"


def _p(row: Mapping[str, Any]) -> str:
    value = row.get("p_adjusted") if row.get("p_adjusted") is not None else row.get("p_value")
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3g}"


def _name(row: Mapping[str, Any]) -> str:
    group = row.get("group")
    return f"{row['method']} ({group})" if group else str(row["method"])


def narrow_results(payload: Mapping[str, Any], *, dataset: str) -> Group:
    """The table and its warnings, laid out to fold rather than cut at any width."""
    rows: Sequence[Mapping[str, Any]] = payload.get("rows") or []
    reference = payload.get("reference") or "the reference"
    table = Table(
        title=f"{dataset}: {payload.get('metric')} (Δ against {reference})",
        title_justify="left",
        show_lines=False,
        pad_edge=False,
    )
    for header, justify in (
        ("method", "left"),
        ("n", "right"),
        ("mean [CI]", "left"),
        ("Δ [CI]", "left"),
        ("p", "right"),
        ("verdict", "left"),
    ):
        table.add_column(header, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        planned = row.get("n_planned")
        seeds = f"{row.get('n', 0)}/{planned}" if planned else str(row.get("n", 0))
        mean = f"{_number(row.get('mean'))} {_interval(row.get('ci_low'), row.get('ci_high'))}".strip()
        difference = (
            ""
            if row.get("is_reference")
            else f"{_signed(row.get('diff_mean'))} "
            f"{_interval(row.get('diff_ci_low'), row.get('diff_ci_high'), signed=True)}".strip()
        )
        table.add_row(
            _name(row),
            seeds,
            mean,
            difference,
            "" if row.get("is_reference") else _p(row),
            str(row["verdict"]),
        )
    notes = [Text(f"- {_name(row)}: {warning}") for row in rows for warning in row.get("warnings") or []]
    hint = Text(
        f"Every column (per-seed values, bootstrap intervals, effect sizes) in a terminal at least "
        f"{WIDE_COLUMNS} columns wide, or:\n  normlab results {dataset} --format md",
        style="dim",
    )
    return Group(table, *notes, hint)
