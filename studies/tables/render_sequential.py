"""What the markdown and HTML results say about each sequential study the table covers: its design line
and, per comparison with the reference, where it stopped and why, with the numbers that account for the
looks; then the trials the looks saved. Plain text items that each renderer escapes its own way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from studies.tables.formatting import Formatter, format_p
from studies.tables.sequential import in_metric_units

if TYPE_CHECKING:
    from studies.tables.model import ResultsTableData
    from studies.tables.sequential import SequentialOutcome, SequentialSummary

__all__ = ["SequentialBlock", "sequential_blocks"]


@dataclass(frozen=True)
class SequentialBlock:
    study_id: str
    design: str  # the design line (studies.store._looks.design_description)
    items: tuple[str, ...]  # one per comparison, then the trials, then any note


def sequential_blocks(table: ResultsTableData, fmt: Formatter) -> list[SequentialBlock]:
    """One block per sequential study of the table, in the table's order of them; [] for a fixed table."""
    return [
        SequentialBlock(
            study_id=study_id,
            design=summary["description"],
            items=(
                *(_comparison(outcome, summary, fmt) for outcome in summary["outcomes"]),
                _trials(summary),
                *summary["notes"],
            ),
        )
        for study_id, summary in table.sequential.items()
    ]


def _comparison(outcome: SequentialOutcome, summary: SequentialSummary, fmt: Formatter) -> str:
    """One comparison, e.g. `dyt vs frozen_ln: stopped: differs from the reference at look 3 (7 paired
    seeds, tested at level 0.025); Δ +0.0187, 95 % repeated CI [+0.0030, +0.0344], stage-wise p 0.001`."""
    against = outcome.get("reference") or summary["reference"]
    name = outcome["method"] if " vs " in outcome["method"] else f"{outcome['method']} vs {against}"
    head = f"{name}: {outcome['decision_text']}"
    if outcome["look"] is None:
        return f"{head} (no look has compared it yet)"
    stopped = outcome["stopped_at_look"]
    where = f"at look {stopped}" if stopped is not None else f"after look {outcome['look']}"
    level = outcome["tested_at_level"]
    tested = "" if level is None else f", tested at level {level:.3g}"
    p = f"stage-wise p {format_p(outcome['p_value'])}" if stopped is not None else "p once it stops"
    return (
        f"{head} {where} ({outcome['seeds']} paired seeds{tested}); {_difference(outcome, summary, fmt)}, {p}"
    )


def _difference(outcome: SequentialOutcome, summary: SequentialSummary, fmt: Formatter) -> str:
    """Δ and its repeated interval as the table shows them: method minus reference, in the metric's units
    (the looks decide on an improvement, positive = better)."""
    estimate, low, high = in_metric_units(outcome, higher_is_better=summary["higher_is_better"])
    coverage = outcome["interval_level"]
    level = "" if coverage is None else f"{coverage * 100:g} % "
    return f"Δ {fmt.signed(estimate)}, {level}repeated CI {fmt.signed_interval(low, high)}"


def _trials(summary: SequentialSummary) -> str:
    trials = summary["trials"]
    seeds = ", ".join(f"{method} {n}" for method, n in summary["seeds_per_arm"].items())
    still = ", ".join(summary["open_arms"]) if summary["open_arms"] else "none (every comparison is decided)"
    return (
        f"trials: {trials['run']} of the fixed design's {trials['fixed_design']} ({trials['saved']} saved, "
        f"{trials['saved_fraction'] * 100:.0f} %); seeds per arm: {seeds}; arms still training: {still}"
    )
