"""A study's tuning views (studies.tuning) as text: per method the importance table, what its spread is
over, why a number is missing and the best tune trial; in HTML and markdown (the study report, whose
figures go with its others) and as the results page's section, figures included
(studies.tables.render_tuning_svg)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from studies.tables.render_tuning_svg import tuning_figures

if TYPE_CHECKING:
    from studies.tuning import EvaluatorImportance, KnobImportance, MethodTuning, StudyTuning

__all__ = ["tuning_html", "tuning_html_section", "tuning_markdown"]

_EVALUATOR_NAMES = {"fanova": "fANOVA", "ped_anova": "PED-ANOVA"}


def tuning_html_section(tunings: Sequence[StudyTuning]) -> str:
    """The results page's <section>: every study's tuning views with its figures (styled as the page's
    evidence figures); empty text when no study has any."""
    tunings = [t for t in tunings if not t.is_empty]
    if not tunings:
        return ""
    parts = [
        '<section class="evidence tuning">',
        "<h2>Knob importance and optimisation history</h2>",
        "<p class=\"caption\">From Optuna's fANOVA and PED-ANOVA evaluators on each study's tune trials "
        "(a sweep: its grid trials); each fit's shares sum to 1 over the knobs it assessed.</p>",
    ]
    for tuning in tunings:
        parts.append(f"<h3>{escape(tuning.study_name)} <code>{escape(tuning.study_id)}</code></h3>")
        parts.append(tuning_html(tuning, heading="h4"))
        parts += [
            f'<figure class="evidence" id="{escape(f"{tuning.study_id}_{f.name}", quote=True)}">'
            f"<figcaption>{escape(f.caption)}</figcaption>\n{f.svg}\n</figure>"
            for f in tuning_figures(tuning)
        ]
    parts.append("</section>")
    return "\n".join(parts)


def tuning_html(tuning: StudyTuning, *, heading: str = "h3") -> str:
    """One study's importance tables and notes, a `heading` per method (the figures are the caller's)."""
    parts = [f'<p class="caption muted">{escape(_about(tuning))}</p>']
    for method in tuning.methods:
        parts.append(f"<{heading}>{escape(method.method)}</{heading}>")
        parts += _method_html(method, tuning)
    return "\n".join(parts)


def tuning_markdown(tuning: StudyTuning) -> str:
    """The importance table and notes of each method, in markdown (the figures are saved apart)."""
    lines = [_about(tuning), ""]
    for method in tuning.methods:
        lines.append(f"**{method.method}**")
        lines.append("")
        evaluators = [e for e in method.importance.evaluators if e.knobs]
        if evaluators:
            lines.append("| knob | " + " | ".join(_name(e) for e in evaluators) + " |")
            lines.append("|---|" + "---|" * len(evaluators))
            for knob in _knob_order(evaluators):
                cells = [_cell(_row(e, knob)) for e in evaluators]
                lines.append(f"| {knob} | " + " | ".join(cells) + " |")
            lines.append("")
        lines += [f"- {note}" for note in _notes(method, tuning)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _method_html(method: MethodTuning, tuning: StudyTuning) -> list[str]:
    evaluators = [e for e in method.importance.evaluators if e.knobs]
    parts = []
    if evaluators:
        head = "".join(f"<th>{escape(_name(e))}</th>" for e in evaluators)
        rows = [
            f'<tr><td class="label">{escape(knob)}</td>'
            + "".join(f"<td>{escape(_cell(_row(e, knob)))}</td>" for e in evaluators)
            + "</tr>"
            for knob in _knob_order(evaluators)
        ]
        parts.append(
            f'<table><thead><tr><th class="label">knob</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    notes = _notes(method, tuning)
    if notes:
        parts.append("<ul>" + "".join(f"<li>{escape(note)}</li>" for note in notes) + "</ul>")
    return parts


def _about(tuning: StudyTuning) -> str:
    direction = "higher is better" if tuning.higher_is_better else "lower is better"
    trials = "tune trials" if tuning.phase == "tune" else "grid trials"
    return f"Objective: {tuning.objective} ({direction}), from the study's {trials}."


def _notes(method: MethodTuning, tuning: StudyTuning) -> list[str]:
    """What the numbers are (trials, spread) and why any is missing."""
    importance = method.importance
    notes = []
    if importance.reason:
        notes.append(f"importance: {importance.reason}")
    else:
        notes.append(f"importance from {importance.trials} completed {tuning.phase} trials")
    for evaluator in importance.evaluators:
        if evaluator.reason:
            notes.append(f"{_name(evaluator)}: {evaluator.reason}")
        elif evaluator.spread_over:
            notes.append(
                f"{_name(evaluator)}: mean ± sd [lowest, highest] of {evaluator.fits} fits, "
                f"over {evaluator.spread_over}"
            )
        else:
            notes.append(f"{_name(evaluator)}: one fit, no spread")
    notes += [f"{knob} not assessed: {why}" for knob, why in importance.omitted.items()]
    if importance.skipped_trials:
        notes.append(
            f"{importance.skipped_trials} completed trial(s) left out: their knobs lie outside the spec's space"
        )
    history = method.history
    if history is not None:
        scored = sum(p.value is not None for p in history.points)
        if history.best_number is not None:
            best = history.points[history.best_number]
            knobs = ", ".join(f"{k}={_knob_value(v)}" for k, v in best.params.items())
            notes.append(
                f"best of {len(history.points)} tune trials ({scored} scored): trial {best.number}, "
                f"{tuning.objective} {best.value:.4g} ({knobs})"
            )
        else:
            notes.append(f"none of {len(history.points)} tune trial(s) has a {tuning.objective} yet")
    return notes


def _knob_value(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)  # a sampled float: 4 digits will do


def _name(evaluator: EvaluatorImportance) -> str:
    return _EVALUATOR_NAMES.get(evaluator.evaluator, evaluator.evaluator)


def _knob_order(evaluators: Sequence[EvaluatorImportance]) -> list[str]:
    """Most important first by the first evaluator; knobs only a later one assessed after."""
    return list(dict.fromkeys(row.knob for e in evaluators for row in e.knobs))


def _row(evaluator: EvaluatorImportance, knob: str) -> KnobImportance | None:
    return next((row for row in evaluator.knobs if row.knob == knob), None)


def _cell(row: KnobImportance | None) -> str:
    if row is None:
        return "–"
    if row.sd is None:
        return f"{row.importance:.3f}"
    return f"{row.importance:.3f} ± {row.sd:.3f} [{row.low:.3f}, {row.high:.3f}]"
