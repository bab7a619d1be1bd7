"""The human-readable columns every renderer shows, computed once from a ResultsTable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.tables.formatting import DASH, Formatter, format_p, format_ratio

if TYPE_CHECKING:
    from studies.tables.model import ResultsRow, ResultsTableData

__all__ = [
    "SECONDARY_COLUMNS",
    "decisive_columns",
    "display_cells",
    "display_headers",
    "formatter_for",
    "table_caption",
]


# Columns of display_headers a compact rendering leaves out (the HTML page behind its "every column"
# toggle, the LaTeX table): the BCa interval, the test's name, the raw p, the effect size, P(improve) and
# the MDE. The rest are the decisive ones: method, seeds, mean and interval, the difference from the
# reference and its interval, the adjusted p, the verdict (and the paper's number where there is one).
SECONDARY_COLUMNS = frozenset({4, 7, 8, 10, 11, 12})


def decisive_columns(headers: list[str]) -> list[int]:
    """The indices of `headers` (display_headers) a compact rendering shows, in order."""
    return [i for i in range(len(headers)) if i not in SECONDARY_COLUMNS]


def display_headers(table: ResultsTableData) -> list[str]:
    level = f"{table.confidence * 100:g} %"
    # A sequential study's comparisons carry the interval of their looks, at the design's level: the test
    # column names it row by row.
    diff_interval = "Δ CI (see test)" if table.sequential else f"Δ {level} CI"
    headers = [
        "method",
        "seeds done/planned",
        f"{table.metric} mean",
        f"{level} CI (t)",
        f"{level} CI (BCa)",
        f"Δ vs {table.reference}",
        diff_interval,
        "test",
        "p",
        f"p adj. ({table.adjustment})",
        "effect size",
        "P(improve)",
        "MDE 80 %",
        "verdict",
    ]
    if table.has_paper_values:
        headers.append("paper")
    return headers


def display_cells(table: ResultsTableData, fmt: Formatter, row: ResultsRow) -> list[str]:
    effect = DASH
    if row.effect_size is not None:
        short = {"Cohen's d_z": "d_z", "Hedges' g": "g"}.get(row.effect_size_name or "", "")
        effect = f"{short} = {row.effect_size:+.2f}"
    test = DASH if row.test in (None, "none") else row.test + ("" if row.paired else " (unpaired)")
    cells = [
        row.label,
        f"{row.n}/{row.n_planned}" + (f" ({row.n_failed} failed)" if row.n_failed else ""),
        fmt.value(row.mean),
        fmt.interval(row.ci_low, row.ci_high),
        fmt.interval(row.boot_low, row.boot_high),
        fmt.signed(row.diff_mean),
        fmt.signed_interval(row.diff_ci_low, row.diff_ci_high),
        test,
        format_p(row.p_value),
        format_p(row.p_adjusted),
        effect,
        format_ratio(row.prob_improvement),
        fmt.value(row.mde_80),
        row.verdict,
    ]
    if table.has_paper_values:
        cells.append(fmt.value(row.paper_value))
    return cells


def formatter_for(table: ResultsTableData) -> Formatter:
    return Formatter(row.mean for row in table.rows)


def table_caption(table: ResultsTableData) -> str:
    direction = "higher is better" if table.higher_is_better else "lower is better"
    stand_in = f"{table.dataset} is a {table.dataset_note.rstrip('.')}. " if table.dataset_note else ""
    return stand_in + (
        f"{table.dataset}: {table.metric} ({direction}); reference {table.reference}; {_seeds_clause(table)}; "
        f"{table.confidence * 100:g} % intervals; {_adjustment_clause(table)}; "
        f"bootstrap: BCa, {table.bootstrap_resamples} resamples, seed fixed; {table.primary_test}"
        f"{_sequential_caption(table)}"
    )


def _seeds_clause(table: ResultsTableData) -> str:
    """How many seeds each row's numbers are over: "5 seeds per row", or what was done of what was planned
    where rows differ (failed or unfinished seeds; the seeds column says which row has how many)."""
    done = sorted({row.n for row in table.rows})
    planned = sorted({row.n_planned for row in table.rows})
    if not done:
        return "no seeds"
    if planned == done and len(done) == 1:
        return f"{done[0]} seed{'' if done == [1] else 's'} per row"
    return f"seeds per row: {_span(done)} done of {_span(planned)} planned"


def _span(values: list[int]) -> str:
    return f"{values[0]}" if len(values) == 1 else f"{values[0]} to {values[-1]}"


def _adjustment_clause(table: ResultsTableData) -> str:
    name = _adjustment_name(table.adjustment)
    if not table.sequential:
        return f"p adjusted by {name} across {sum(r.p_value is not None for r in table.rows)} comparison(s)"
    # A sequential study's comparisons are not adjusted here: its looks applied Holm's step-down.
    fixed = sum(r.p_adjusted is not None for r in table.rows)
    return f"p adjusted by {name} across {fixed} comparison(s) of fixed-seed studies"


def _sequential_caption(table: ResultsTableData) -> str:
    if not table.sequential:
        return ""
    return (
        f"; sequential study {', '.join(table.sequential)}: seeds were added look by look until each "
        "comparison was decided, so a fixed-n test would ignore the looks: its comparisons show the "
        "repeated confidence interval (valid over every look) and the stage-wise p-value at the level its "
        "own Holm step-down tested it at, and a comparison that pools its seeds with other "
        "studies' is not tested"
    )


def _adjustment_name(adjustment: str) -> str:
    return {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "nothing (raw)"}.get(adjustment, adjustment)
