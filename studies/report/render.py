"""A study report as JSON (plain data) and as markdown (GitHub-flavoured)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any

from studies.catalog import PAPERS
from studies.tables.formatting import DASH, format_p
from studies.tables.render_text import to_json as table_json
from studies.tables.render_text import to_markdown as table_markdown
from studies.tables.render_tuning_text import tuning_markdown

if TYPE_CHECKING:
    from studies.claims.verdicts import Finding
    from studies.report.model import StudyReportData

__all__ = [
    "POWER_NOTE",
    "finding_cells",
    "finding_headers",
    "mechanism_rows",
    "paper_rows",
    "power_rows",
    "precondition_rows",
    "preregistered_rows",
    "provenance_items",
    "report_title",
    "scope_line",
    "sensitivity_rows",
    "to_json",
    "to_markdown",
    "verdict_line",
]

VERDICT_WORDS = {
    "supported": "SUPPORTED",
    "contradicted": "CONTRADICTED",
    "inconclusive": "INCONCLUSIVE at this power",
    "not tested": "NOT TESTED",
}

Rows = tuple[list[str], list[list[str]]]


def _plain(value: Any) -> Any:
    """JSON-ready: dataclasses and pydantic models to dicts, NaN and infinities to None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump(mode="json"))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def to_json(report: StudyReportData) -> dict[str, Any]:
    """Every section as plain data; figures as {name, caption, svg}."""
    payload: dict[str, Any] = {
        "study_id": report.study_id,
        "study_name": report.study_name,
        "kind": report.kind,
        "metric": report.metric,
        "verdict": report.verdict,
        "claim": None if report.claim is None else _plain(report.claim),
        "paper_title": None if report.claim is None else PAPERS[report.claim.paper],
        "result": None if report.result is None else _plain(report.result),
        "dataset": {**_plain(report.dataset), "is_stand_in": report.dataset.is_stand_in},
        "dataset_note": report.dataset_note,
        "paper_vs_measured": _plain(report.paper_vs_measured),
        "table": None if report.table is None else table_json(report.table),
        "figures": [{"name": f.name, "caption": f.caption, "svg": f.svg} for f in report.figures],
        "provenance": _plain(report.provenance),
        "notes": list(report.notes),
        "scope": report.scope,
        "preconditions": [p.to_dict() for p in report.preconditions],
        "preregistered": _plain(report.preregistered),
        "sensitivity": _plain(report.sensitivity),
        "power": _plain(report.power),
        "mechanism": None if report.mechanism is None else report.mechanism.to_json(),
        "tuning": None if report.tuning is None else report.tuning.to_json(),
    }
    json.dumps(payload, allow_nan=False)  # fails here, not in a client, if anything is not strict JSON
    return payload


# Findings mix units (a difference, a rank, a correlation), so each number gets 4 significant digits
# rather than one table-wide number of decimals (studies.tables.formatting.Formatter).
def _num(value: float | None) -> str:
    return DASH if value is None else f"{value:.4g}"


def _interval(low: float | None, high: float | None) -> str:
    return DASH if low is None or high is None else f"[{low:.4g}, {high:.4g}]"


def report_title(report: StudyReportData) -> str:
    what = report.claim.title if report.claim is not None else f"{report.dataset.dataset}: comparison"
    return f"{what} — study {report.study_name} ({report.study_id})"


def verdict_line(report: StudyReportData) -> str:
    if report.result is None:
        return "No paper claim: this report compares every row with the reference, seed by seed."
    line = f"Verdict: {VERDICT_WORDS.get(report.result.verdict, report.result.verdict)}"
    if report.result.reason:
        line += f" ({report.result.reason})"
    return line


def scope_line(report: StudyReportData) -> str | None:
    """What the verdict is about, when that is not the paper's own data."""
    if report.result is None:
        return None
    if report.scope == "stand-in":
        paper = report.dataset.paper_dataset or "the paper's data"
        return (
            f"This is a verdict about {report.dataset.dataset}, a stand-in, not about {paper}: it is tallied "
            "apart from verdicts on the paper's data."
        )
    if report.scope == "init":
        return "Measured at initialisation: the claim is about any input, so the dataset does not limit it."
    return None


def preregistered_rows(report: StudyReportData) -> Rows:
    return ["value", "set to", "source"], [[v.name, v.value, v.source] for v in report.preregistered]


def precondition_rows(report: StudyReportData) -> Rows:
    headers = ["precondition", "requires", "measured", "met", "source"]
    rows = [
        [p.name, p.requirement, p.measured, "yes" if p.met else "NO", p.source] for p in report.preconditions
    ]
    return headers, rows


def sensitivity_rows(report: StudyReportData) -> Rows:
    headers = ["choice", "value", "verdict", "pre-registered", "why"]
    rows = [
        [r.parameter, f"{r.value:g}", r.verdict, "yes" if r.preregistered else "", r.summary]
        for r in report.sensitivity
    ]
    return headers, rows


def _freeze_cell(seed: Any) -> str:
    if seed.freeze_decided is None:
        return "no schedule"
    if seed.froze:
        return f"yes, after epoch {seed.freeze_epoch}"
    return "no" if seed.freeze_decided else "undecided (stopped before T_freeze)"


def mechanism_rows(report: StudyReportData) -> Rows:
    """Per gated row and seed: the freeze, the last gate entropy, and the selector gradient variance."""
    headers = [
        "row",
        "seed",
        "freeze fired",
        "last gate entropy",
        "eps_H",
        "T_freeze",
        "gate after freeze",
        "selector grad var (first → last epoch)",
    ]
    rows = []
    for method in report.mechanism.methods if report.mechanism is not None else ():
        for seed in method.seeds:
            entropy = seed.series("entropy")
            variance = seed.series("selector_grad_var")
            rows.append(
                [
                    method.label,
                    str(seed.seed),
                    _freeze_cell(seed),
                    _num(entropy[-1][1]) if entropy else DASH,
                    _num(seed.eps_h),
                    DASH if seed.t_freeze is None else str(seed.t_freeze),
                    seed.post_freeze_gate or DASH,
                    f"{variance[0][1]:.3g} → {variance[-1][1]:.3g}" if variance else DASH,
                ]
            )
    return headers, rows


POWER_NOTE = (
    "80 % power at the check's alpha, with the seed-to-seed spread measured here: to detect the paper's "
    "effect with a two-sided paired t-test, or, for an equivalence claim, for the interval to fall within "
    "the margin (two one-sided tests; a conservative bound), once if the paper's effect is the true "
    "difference and once if there is no true difference. A count that is missing says why."
)

# An equivalence claim is sized under a null effect; a directional one is not (there is nothing to find).
NOT_APPLICABLE = "n/a (directional claim)"


def power_rows(report: StudyReportData) -> Rows:
    headers = [
        "comparison",
        "seeds are sized to",
        "paper's effect",
        "SD of seed differences (measured)",
        "seeds run",
        "seeds for 80 % (paper's effect)",
        "seeds for 80 % (no true difference)",
        "why a count is missing",
    ]
    rows = []
    for r in report.power:
        equivalence = r.margin is not None
        null = _count(r.seeds_needed_null) if equivalence else NOT_APPLICABLE
        rows.append(
            [
                r.label,
                f"show it within ±{_num(r.margin)}" if equivalence else "detect the effect",
                _num(r.paper_effect),
                _num(r.sd_difference),
                str(r.seeds_run),
                _count(r.seeds_needed),
                null,
                r.missing or "",
            ]
        )
    return headers, rows


def _count(seeds: int | None) -> str:
    return DASH if seeds is None else str(seeds)


def finding_headers(report: StudyReportData) -> list[str]:
    level = f"{(report.result.confidence if report.result else 0.95) * 100:g} %"
    return [
        "finding",
        "expected",
        "measured",
        f"{level} CI",
        "n",
        "p",
        "p adj.",
        "MDE 80 %",
        "paper",
        "verdict",
    ]


def finding_cells(finding: Finding) -> list[str]:
    return [
        finding.label,
        finding.expected,
        _num(finding.measured),
        _interval(finding.ci_low, finding.ci_high),
        str(finding.n),
        format_p(finding.p_value),
        format_p(finding.p_adjusted),
        _num(finding.mde),
        _num(finding.paper),
        finding.verdict,
    ]


def paper_rows(report: StudyReportData) -> tuple[list[str], list[list[str]]]:
    level = f"{(report.result.confidence if report.result else 0.95) * 100:g} %"
    headers = ["row", "metric", "paper", "measured mean", f"{level} CI", "seeds", "comparable"]
    rows = [
        [
            r.row,
            r.metric,
            _num(r.paper),
            _num(r.measured),
            _interval(r.ci_low, r.ci_high),
            str(r.n),
            "yes" if r.comparable else "no (other data)",
        ]
        for r in report.paper_vs_measured
    ]
    return headers, rows


def provenance_items(report: StudyReportData) -> list[tuple[str, str, str | None]]:
    """(name, value, the URL the value links to or None) for each provenance entry."""
    p = report.provenance
    items = [
        ("study", f"{p.study_name} ({p.study_id}), status {p.status}"),
        ("dataset", report.dataset.dataset + (f" — {report.dataset_note}" if report.dataset_note else "")),
        ("seeds", ", ".join(map(str, p.seeds)) or DASH),
        ("tune seeds", ", ".join(map(str, p.tune_seeds)) or DASH),
        ("split seed", str(p.split_seed)),
        ("created", p.created_at or DASH),
        ("started", p.started_at or DASH),
        ("finished", p.finished_at or DASH),
        ("report generated", p.generated_at),
        ("NormLab", f"{p.normlab_version} (git {p.git_revision})"),
        ("packages", ", ".join(f"{k} {v}" for k, v in p.packages.items()) or DASH),
    ]
    items.extend(("plugin", plugin) for plugin in p.plugins)
    if p.mlflow_experiment_id:
        items.append(("MLflow experiment", p.mlflow_experiment_id))
    if p.ray_job_id:
        items.append(("Ray job", p.ray_job_id))
    links = {"MLflow experiment": p.mlflow_experiment_url}
    return [(name, value, links.get(name)) for name, value in items]


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines


def to_markdown(report: StudyReportData) -> str:
    import yaml

    lines = [f"# {report_title(report)}", ""]
    claim = report.claim
    if claim is not None:
        lines += [
            f"**Claim** `{claim.id}` from *{PAPERS[claim.paper]}*:",
            "",
            f"> {claim.statement}",
            "",
            f"**The paper reports:** {claim.reported.text}"
            + (f" ({claim.reported.significance})" if claim.reported.significance else ""),
            "",
        ]
    if report.preregistered:
        headers, rows = preregistered_rows(report)
        lines += ["## Pre-registered values (fixed before the result)", "", *_md_table(headers, rows), ""]
    if report.preconditions:
        headers, rows = precondition_rows(report)
        lines += ["## Preconditions (checked before any verdict)", "", *_md_table(headers, rows), ""]
    lines += [f"**{verdict_line(report)}**", ""]
    scope = scope_line(report)
    if scope:
        lines += [f"*{scope}*", ""]
    if report.result is not None and not report.result.reason:
        lines += [report.result.summary, ""]
    data_line = f"**Data:** {report.dataset.note}."
    if not report.dataset.comparable:
        data_line += " The paper's numbers below are shown for orientation only."
    lines += [data_line, ""]
    if report.notes:
        lines += [*(f"- {_md(n)}" for n in report.notes), ""]

    if report.paper_vs_measured:
        headers, rows = paper_rows(report)
        lines += ["## Paper vs measured", "", *_md_table(headers, rows), ""]

    if report.result is not None and not report.result.reason:
        lines += [f"## Findings (check `{report.result.check}`)", ""]
        if report.result.findings:
            lines += _md_table(finding_headers(report), [finding_cells(f) for f in report.result.findings])
            lines += [""] + [f"- {_md(f.label)}: {_md(f.note)}" for f in report.result.findings if f.note]
        else:
            lines.append("No findings: the study has no data this check can read.")
        lines += [f"- note: {_md(n)}" for n in report.result.notes]
        if claim is not None and claim.notes:
            lines += ["", f"*How the claim is read:* {claim.notes}"]
        lines.append("")
    if report.sensitivity:
        headers, rows = sensitivity_rows(report)
        lines += [
            "## Sensitivity: the verdict across the free choices it rests on",
            "",
            *_md_table(headers, rows),
            "",
        ]
    if report.power:
        headers, rows = power_rows(report)
        lines += [
            "## Power: seeds needed to decide",
            "",
            *_md_table(headers, rows),
            "",
            POWER_NOTE,
            "",
        ]

    if report.mechanism is not None:
        headers, rows = mechanism_rows(report)
        lines += [
            "## Mechanism: AutoNorm's gates, seed by seed",
            "",
            *_md_table(headers, rows),
            "",
            "Entropy is the layer-mean noise-free gate entropy the freeze rule watched; the selector gradient "
            "variance is taken across each epoch's steps (absent once the selectors are frozen). The HTML "
            "report plots both per epoch.",
            "",
        ]

    if report.table is not None:
        lines += ["## Comparison with the reference", ""]
        lines += [table_markdown(report.table).replace("### ", "### Table: ", 1), ""]

    if report.tuning is not None:
        lines += ["## Knob importance and optimisation history", "", tuning_markdown(report.tuning)]

    if report.figures:
        lines += ["## Figures", "", "The HTML report shows these figures inline:", ""]
        lines += [f"- {_md(f.caption)}" for f in report.figures] + [""]

    lines += ["## Provenance", ""]
    lines += [
        f"- **{k}:** [{_md(v)}]({url})" if url else f"- **{k}:** {_md(v)}"
        for k, v, url in provenance_items(report)
    ]
    lines += [
        "",
        "Spec:",
        "",
        "```yaml",
        yaml.safe_dump(dict(report.provenance.spec), sort_keys=False).rstrip(),
        "```",
    ]
    return "\n".join(lines) + "\n"
