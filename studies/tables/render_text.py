"""JSON (a dict), CSV and markdown renderings of a results table."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

from studies.tables.columns import display_cells, display_headers, formatter_for, table_caption
from studies.tables.render_sequential import sequential_blocks

if TYPE_CHECKING:
    from studies.tables.model import ResultsRow, ResultsTableData

__all__ = ["CSV_COLUMNS", "row_to_json", "to_csv", "to_json", "to_markdown"]

# Row keys in JSON and CSV order: identity and counts, the row's own statistics, the comparison
# with the reference, then provenance.
CSV_COLUMNS = (
    "method",
    "group",
    "n",
    "mean",
    "ci_low",
    "ci_high",
    "n_planned",
    "n_failed",
    "n_unfinished",
    "per_seed",
    "failed_seeds",
    "std",
    "sem",
    "boot_low",
    "boot_high",
    "boot_resamples",
    "median",
    "iqm",
    "confidence",
    "is_reference",
    "diff_mean",
    "diff_ci_low",
    "diff_ci_high",
    "paired",
    "test",
    "p_value",
    "p_adjusted",
    "adjustment",
    "p_t",
    "p_wilcoxon",
    "effect_size",
    "effect_size_name",
    "prob_improvement",
    "mde_80",
    "verdict",
    "warnings",
    "paper_value",
    "study_ids",
    "mlflow_run_ids",
)


def row_to_json(table: ResultsTableData, row: ResultsRow) -> dict[str, Any]:
    values: dict[str, Any] = {
        "method": row.method,
        "group": row.group,
        "n": row.n,
        "mean": row.mean,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "n_planned": row.n_planned,
        "n_failed": row.n_failed,
        "n_unfinished": row.n_unfinished,
        "per_seed": {str(seed): value for seed, value in row.per_seed},
        "failed_seeds": list(row.failed_seeds),
        "std": row.std,
        "sem": row.sem,
        "boot_low": row.boot_low,
        "boot_high": row.boot_high,
        "boot_resamples": row.boot_resamples,
        "median": row.median,
        "iqm": row.iqm,
        "confidence": table.confidence,
        "is_reference": row.is_reference,
        "diff_mean": row.diff_mean,
        "diff_ci_low": row.diff_ci_low,
        "diff_ci_high": row.diff_ci_high,
        "paired": row.paired,
        "test": row.test,
        "p_value": row.p_value,
        "p_adjusted": row.p_adjusted,
        "adjustment": table.adjustment,
        "p_t": row.p_t,
        "p_wilcoxon": row.p_wilcoxon,
        "effect_size": row.effect_size,
        "effect_size_name": row.effect_size_name,
        "prob_improvement": row.prob_improvement,
        "mde_80": row.mde_80,
        "verdict": row.verdict,
        "warnings": list(row.warnings),
        "paper_value": row.paper_value,
        "study_ids": list(row.study_ids),
        "mlflow_run_ids": list(row.mlflow_run_ids),
    }
    assert tuple(values) == CSV_COLUMNS, "JSON keys and CSV columns must stay in step"
    return values


def to_json(table: ResultsTableData) -> dict[str, Any]:
    """{"dataset", "dataset_note", "metric", "reference", "rows": [...]}: JSON-safe, None where a number is
    undefined; a table that covers sequential studies adds "sequential": {study id: its summary}
    (studies.tables.sequential)."""
    payload: dict[str, Any] = {
        "dataset": table.dataset,
        "dataset_note": table.dataset_note,  # "stand-in for ...: ..." or None for the paper's own data
        "metric": table.metric,
        "reference": table.reference,
        "rows": [row_to_json(table, row) for row in table.rows],
    }
    if table.sequential:
        payload["sequential"] = dict(table.sequential)
    return payload


def to_csv(table: ResultsTableData) -> str:
    """One line per row with the JSON keys as columns; lists joined by ';', per-seed as seed=value."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in table.rows:
        writer.writerow(_csv_cell(value) for value in row_to_json(table, row).values())
    return buffer.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ";".join(f"{k}={v!r}" for k, v in value.items())
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def to_markdown(table: ResultsTableData) -> str:
    """A GitHub-flavoured markdown table, then per-row notes (warnings) and provenance. Where the table
    says whether its studies are complete, that comes first, under the caption: an incomplete study's
    missing trials, and the newer incomplete studies passed over."""
    fmt = formatter_for(table)
    headers = display_headers(table)
    lines = [
        f"### {_md(table.dataset)}: {_md(table.metric)}",
        "",
        _md(table_caption(table)),
        "",
        *_completeness_lines(table),
        "| " + " | ".join(_md(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    for row in table.rows:
        lines.append("| " + " | ".join(_md(c) for c in display_cells(table, fmt, row)) + " |")
    for block in sequential_blocks(table, fmt):
        lines += ["", f"**Sequential study {_md(block.study_id)}**: {_md(block.design)}", ""]
        lines += [f"- {_md(item)}" for item in block.items]
    notes = [row for row in table.rows if row.warnings]
    if notes:
        lines += ["", "**Warnings**", ""]
        lines += [f"- {_md(row.label)}: {_md('; '.join(row.warnings))}" for row in notes]
    lines += ["", "**Per-seed values and provenance**", ""]
    for row in table.rows:
        seeds = ", ".join(f"{seed}: {fmt.value(value)}" for seed, value in row.per_seed) or "none"
        failed = f"; failed seeds {', '.join(map(str, row.failed_seeds))}" if row.failed_seeds else ""
        studies = ", ".join(row.study_ids) or "none"
        runs = ", ".join(row.mlflow_run_ids) or "none"
        lines.append(
            f"- {_md(row.label)}: seeds {{{_md(seeds)}}}{failed}; studies {_md(studies)}; MLflow runs {_md(runs)}"
        )
    return "\n".join(lines) + "\n"


def _completeness_lines(table: ResultsTableData) -> list[str]:
    if not table.completeness:
        return []
    lines = ["**Completeness**", ""]
    for note in table.completeness:
        study = f"study {_md(note.study_id)} ({_md(note.name)})"
        if note.shown:
            lines.append(f"- {study}: {_md(note.reason)}")
        else:
            lines.append(f"- passed over, newer but not complete: {study}: {_md(note.reason)}")
    return [*lines, ""]


def _md(text: str) -> str:
    """Escapes what would break a markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
