"""A verdict across the values of a free choice: the same check, evaluated on each value's trials.

Some claims hold only for part of a knob's range (Transforming Rank's Post-Norm collapse, on a ViT, only
from a branch init scale of about 12). A verdict at one value is then a free choice the report must show:
the study sweeps the knob as a grid axis, the check is evaluated on the trials of every value
(`verdict_by`), the headline verdict is the pre-registered value's (`Sensitivity.at`), and the result
says for which range the claim holds ("supported for init_scale >= 12 only").

Any check type can reuse this: give it a `sensitivity: Sensitivity | None` field and evaluate through
`with_sensitivity(self.sensitivity, data, self._evaluate)`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from studies.claims.trials import StudyData, same_value
from studies.claims.verdicts import SUPPORTED, CheckResult

__all__ = [
    "Sensitivity",
    "holds_for",
    "knob_values",
    "results_by",
    "trials_at",
    "verdict_by",
    "with_sensitivity",
]

Evaluate = Callable[[StudyData], CheckResult]


class Sensitivity(BaseModel):
    """The knob a verdict may rest on and its pre-registered value (the headline verdict is this one's)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    knob: str = Field(min_length=1)  # a knob the study's grid sweeps, e.g. init_scale
    at: float | str  # the pre-registered value, e.g. 1.0


def _sort_key(value: Any) -> tuple[int, float, str]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return (1, 0.0, str(value))
    return (0, number, "") if math.isfinite(number) else (1, 0.0, str(value))


def knob_values(data: StudyData, knob: str) -> list[Any]:
    """The distinct values of a knob among the study's trials, in numeric order (text after numbers)."""
    values: list[Any] = []
    for trial in data.trials:
        value = trial.knob(knob)
        if value is not None and not any(same_value(value, seen) for seen in values):
            values.append(value)
    return sorted(values, key=_sort_key)


def trials_at(data: StudyData, knob: str, value: Any) -> StudyData:
    """The study with only the trials whose `knob` has `value`."""
    return dataclasses.replace(data, trials=tuple(t for t in data.trials if same_value(t.knob(knob), value)))


def results_by(knob: str, data: StudyData, evaluate: Evaluate) -> list[tuple[Any, CheckResult]]:
    """The check's result on the trials of each value of `knob`, in numeric order."""
    return [(value, evaluate(trials_at(data, knob, value))) for value in knob_values(data, knob)]


def verdict_by(knob: str, data: StudyData, evaluate: Evaluate) -> list[tuple[Any, str, str]]:
    """(value, verdict, summary) of the check on each value's trials: the per-value verdict table."""
    return [(value, result.verdict, result.summary) for value, result in results_by(knob, data, evaluate)]


def _fmt(value: Any) -> str:
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def _table_row(result: CheckResult) -> str:
    """One value's verdict and its findings in brief, in the headline's finding order: "supported:
    0.0889 < 0.1 (supported); 0.455 > 0.2 (supported)"; a result without findings gives its summary."""
    if not result.findings:
        return f"{result.verdict}: {result.reason or result.summary}"
    parts = [
        f"{'–' if f.measured is None else f'{f.measured:.3g}'} {f.expected} ({f.verdict})"
        for f in result.findings
    ]
    return f"{result.verdict}: " + "; ".join(parts)


def holds_for(knob: str, rows: Sequence[tuple[Any, str]], verdict: str = SUPPORTED) -> str:
    """Where on the grid the verdict holds, in words: "supported for init_scale >= 12 only (grid 1 to 16)",
    "supported at every init_scale on the grid (1 to 16)", "supported at no init_scale ...", or the list."""
    if not rows:
        return f"{knob} has no value on the grid"
    values = [value for value, _ in rows]
    span = f"{_fmt(values[0])} to {_fmt(values[-1])}" if len(values) > 1 else _fmt(values[0])
    flags = [v == verdict for _, v in rows]
    where = [i for i, flag in enumerate(flags) if flag]
    if len(where) == len(rows):
        return f"{verdict} at every {knob} on the grid ({span})"
    if not where:
        return f"{verdict} at no {knob} on the grid ({span})"
    first, last = where[0], where[-1]
    if last - first + 1 == len(where):  # one contiguous run
        if last == len(rows) - 1:
            range_text = f"{knob} >= {_fmt(values[first])}"
        elif first == 0:
            range_text = f"{knob} <= {_fmt(values[last])}"
        elif first == last:
            range_text = f"{knob} = {_fmt(values[first])}"
        else:
            range_text = f"{_fmt(values[first])} <= {knob} <= {_fmt(values[last])}"
        return f"{verdict} for {range_text} only (grid {span})"
    listed = ", ".join(_fmt(values[i]) for i in where)
    return f"{verdict} at {knob} = {listed} only (grid {span})"


def with_sensitivity(sensitivity: Sensitivity | None, data: StudyData, evaluate: Evaluate) -> CheckResult:
    """The check's result at the pre-registered value, with the per-value verdict table in its notes and
    the range where it holds in its summary. Without a sensitivity, or when the study's trials hold one
    value of the knob (not swept, or a report that already split them), the plain result, saying so."""
    if sensitivity is None:
        return evaluate(data)
    knob = sensitivity.knob
    values = knob_values(data, knob)
    if len(values) <= 1:
        result = evaluate(data)
        if values:
            note = f"the trials hold {knob} = {_fmt(values[0])} only: this verdict is for that value alone"
        else:
            note = f"the trials do not vary {knob}: this verdict is for the spec's value alone"
        return dataclasses.replace(result, notes=(*result.notes, note))
    rows = results_by(knob, data, evaluate)
    registered = next((result for value, result in rows if same_value(value, sensitivity.at)), None)
    table = tuple(f"{knob} = {_fmt(value)}: {_table_row(result)}" for value, result in rows)
    where = holds_for(knob, [(value, result.verdict) for value, result in rows])
    if registered is None:
        reason = (
            f"the grid has no {knob} = {_fmt(sensitivity.at)}, the pre-registered value "
            f"(swept: {', '.join(_fmt(v) for v in values)}); {where}"
        )
        result = CheckResult.not_tested(rows[0][1].check, reason)
        return dataclasses.replace(result, notes=table)
    header = (
        f"headline verdict at the pre-registered {knob} = {_fmt(sensitivity.at)}; across the grid: {where}"
    )
    return dataclasses.replace(
        registered,
        summary=f"{registered.summary} Across {knob}: {where}.",
        notes=(*registered.notes, header, *table),
    )
