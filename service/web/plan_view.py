"""A study's plan beside what it spent, for its page: the trials and wall time the plan gave its spec
before launch (priced from the other studies of its dataset and model, never from its own trials), and
the trials and time it has taken so far; and the trial plan its driver resolved when it started (each
trial's resources, seeds per trial and compile mode, with the throughput measurement that chose them on a
GPU: workers.driver.throughput), as the driver stored it (studies.store.study_trial_plan).

The plan is computed once per study and spec in this process (the page polls every few seconds, and a
sequential plan simulates the design): it is the before-launch figure, so caching it is its meaning too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from studies.limits import StudyLimits
from studies.planning import Cluster, Cost, History, StudyPlan, plan_study, without_study
from studies.spec import StudySpec
from studies.store import StudyView, TrialView

__all__ = ["CandidateRow", "PlanBeside", "ResolvedPlan", "is_planned", "plan_beside", "resolved_plan"]


@dataclass(frozen=True)
class PlanRow:
    what: str
    planned: str
    spent: str


@dataclass(frozen=True)
class CandidateRow:
    """One setting the driver measured (or could not), as its candidates table shows it."""

    setting: str
    samples_per_s: str  # per GPU: every seed of every trial on it
    overhead: str  # what each trial pays before its steady steps (build, warm-up, compile)
    amortised: str  # samples/s with that overhead spread over the trial's samples: what the rule compares
    versus_baseline: str  # x one eager seed per trial
    chosen: bool


@dataclass(frozen=True)
class ResolvedPlan:
    """The trial plan the driver resolved when the study started."""

    summary: str  # resources, seeds per trial, compile mode, and why
    choice: str | None  # the measured choice in words; None where nothing was measured
    basis: str | None  # where the figures come from and the rule that chose
    candidates: tuple[CandidateRow, ...]


@dataclass(frozen=True)
class PlanBeside:
    rows: tuple[PlanRow, ...]
    wall_basis: str  # where the plan's wall time comes from
    gpu_basis: str  # where its GPU-hours come from, or why there are none
    resolved: ResolvedPlan | None = None  # None until the driver planned (or a study from before it said)


_PLANS: dict[tuple[str, str], StudyPlan] = {}
_MAX_PLANS = 64


def is_planned(study_id: str, spec: StudySpec) -> bool:
    """Whether the study's plan is cached: its page then needs no history read from the store."""
    return (study_id, spec.model_dump_json()) in _PLANS


def _plan(
    study_id: str, spec: StudySpec, history: History, cluster: Cluster, limits: StudyLimits | None
) -> StudyPlan:
    key = (study_id, spec.model_dump_json())
    plan = _PLANS.get(key)
    if plan is None:
        plan = plan_study(spec, history=without_study(history, study_id), cluster=cluster, limits=limits)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.pop(next(iter(_PLANS)))  # the oldest: dicts keep insertion order
        _PLANS[key] = plan
    return plan


def plan_beside(
    study: StudyView,
    trials: Sequence[TrialView],
    *,
    history: History,
    cluster: Cluster,
    limits: StudyLimits | None,
    now: datetime | None = None,
    trial_plan: Mapping[str, Any] | None = None,
) -> PlanBeside | None:
    """None when the stored spec no longer validates (the page shows the spec as stored instead).
    `trial_plan`: the plan the study's driver stored, if it has."""
    try:
        spec = StudySpec.model_validate(study.spec)
    except ValueError:
        return None
    plan = _plan(study.id, spec, history, cluster, limits)
    done = sum(1 for t in trials if t.status != "running")
    expected = _expected(plan)
    rows = [
        PlanRow(
            "trials (one per seed)",
            f"{plan.planned.trials:g}" + (f" at most, {expected.trials:.1f} expected" if expected else ""),
            f"{done} ended, {len(trials) - done} running",
        ),
        PlanRow(
            "final seeds per method",
            f"{plan.planned.seeds_per_method:g}"
            + (f" at most, {expected.seeds_per_method:.1f} expected" if expected else ""),
            _seeds_spent(trials),
        ),
        PlanRow("wall time", _hours(plan.planned.wall_hours), _elapsed(study, now)),
        PlanRow(f"GPU-hours ({plan.gpu.gpu})", _hours(plan.planned.gpu_hours, unit="GPU-h"), "not metered"),
    ]
    return PlanBeside(
        rows=tuple(rows),
        wall_basis="; ".join(plan.wall.basis) if plan.wall.basis else plan.wall.source,
        gpu_basis="; ".join(plan.gpu.basis) if plan.gpu.basis else plan.gpu.provenance,
        resolved=resolved_plan(trial_plan),
    )


def resolved_plan(stored: Mapping[str, Any] | None) -> ResolvedPlan | None:
    """The driver's stored plan (workers.trials.plan.TrialPlan.to_dict) for the page; None without one."""
    if not stored:
        return None
    summary = str(stored.get("describe") or "")
    throughput = stored.get("throughput")
    if not throughput:
        return ResolvedPlan(summary=summary, choice=None, basis=None, candidates=())
    source = {
        "measured": "measured when this study started",
        "cached": "measured by an earlier study of the same shape",
        "kept": "chosen by this study's first driver",
    }.get(str(throughput.get("source")), "measured")
    basis = (
        f"{source}, on {throughput.get('gpu') or 'a GPU'}"
        + (f" at {throughput['measured_at']}" if throughput.get("measured_at") else "")
        + (f", a trial of {throughput['probed_method']}" if throughput.get("probed_method") else "")
        + f". Rule: {throughput.get('rule') or 'fastest samples/s per GPU'}."
    )
    return ResolvedPlan(
        summary=summary,
        choice=str(throughput.get("summary") or ""),
        basis=basis,
        candidates=tuple(_candidate_row(row) for row in throughput.get("candidates") or ()),
    )


def _candidate_row(row: Mapping[str, Any]) -> CandidateRow:
    setting = (
        f"{row.get('seeds_per_trial')} seed(s) per trial, compile {row.get('compile')}, "
        f"{row.get('trials_per_gpu')} trial(s) per GPU"
    )
    rate, amortised, ratio = (
        row.get("samples_per_s"),
        row.get("effective_samples_per_s"),
        row.get("x_baseline"),
    )
    if rate is None:
        note = str(row.get("note") or "not measured")
        return CandidateRow(setting, note, "", "", "", chosen=False)
    return CandidateRow(
        setting=setting,
        samples_per_s=f"{float(rate):,.0f}",
        overhead=f"{float(row.get('overhead_s') or 0.0):.1f} s",
        amortised="" if amortised is None else f"{float(amortised):,.0f}",
        versus_baseline="" if ratio is None else f"{float(ratio):.2f}x",
        chosen=bool(row.get("chosen")),
    )


def _expected(plan: StudyPlan) -> Cost | None:
    """The sequential design's expected cost under the effect it was sized for, None for a fixed design."""
    if plan.sequential is None or not plan.sequential.scenarios:
        return None
    return plan.sequential.scenarios[0].expected


def _seeds_spent(trials: Sequence[TrialView]) -> str:
    final = [t for t in trials if t.phase in ("final", "grid") and t.seed is not None]
    by_method: dict[str, set[int]] = {}
    for t in final:
        by_method.setdefault(t.method, set()).add(int(t.seed or 0))
    return ", ".join(f"{m} {len(s)}" for m, s in by_method.items()) or "none yet"


def _hours(value: float | None, *, unit: str = "") -> str:
    if value is None:
        return "no prediction"
    if unit:
        return f"{value:.2f} {unit}"
    return f"{60 * value:.1f} min" if value < 2 else f"{value:.1f} h"


def _elapsed(study: StudyView, now: datetime | None) -> str:
    if study.started_at is None:
        return "not started"
    end = study.finished_at or now or datetime.now(timezone.utc)
    start = study.started_at if study.started_at.tzinfo else study.started_at.replace(tzinfo=timezone.utc)
    end = end if end.tzinfo else end.replace(tzinfo=timezone.utc)
    minutes = (end - start).total_seconds() / 60
    so_far = "" if study.finished_at else " so far"
    return f"{minutes:.1f} min{so_far}" if minutes < 120 else f"{minutes / 60:.1f} h{so_far}"
