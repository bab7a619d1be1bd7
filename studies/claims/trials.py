"""The plain trial data a claim check reads: no database, MLflow or torch types.

A check sees the study's final-phase (or grid) trials, each with its last epoch's metrics, its knob
values and, when the store has it, its per-epoch history. Init-time measurements (`init_*` keys) live in
the epoch-0 row of the history, because the training loop reports them once, before epoch 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from studies.records import COMPLETED_STATUSES

if TYPE_CHECKING:
    from studies.claims.looks_outcome import SequentialComparison

__all__ = [
    "PRIMARY",
    "Selector",
    "StudyData",
    "TrialData",
    "describe_selector",
    "matches",
    "metric_direction",
    "parse_group_label",
    "same_value",
    "select",
]

PRIMARY = "primary"  # metric name of the study's primary test metric (test_<dataset metric>)
INIT_PREFIX = "init_"

# A row selector: {"method": "autonorm_s", "tau": 0.5, ...}; every key must match (knobs by value).
Selector = Mapping[str, Any]


def parse_group_label(label: str | None) -> dict[str, str]:
    """Knob values of a grid-point label ("norm_placement=post,skip_scale=1.0"), as strings."""
    if not label or label == "base":
        return {}
    pairs = (part.split("=", 1) for part in label.split(",") if "=" in part)
    return {key.strip(): value.strip() for key, value in pairs}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class TrialData:
    """One final-phase or grid trial of a study."""

    method: str
    seed: int
    status: str
    value: float | None  # the study's primary test metric (the store's metric_value)
    metrics: Mapping[str, Any] = field(default_factory=dict)  # the last epoch's reported metrics
    group: str | None = None  # grid-point label; None in compare studies
    knobs: Mapping[str, Any] = field(default_factory=dict)  # knob values the trial ran with
    history: Sequence[Mapping[str, Any]] = ()  # per-epoch metrics, epoch 0 first (may be empty)
    trial_key: str = ""
    mlflow_run_id: str | None = None

    @property
    def completed(self) -> bool:
        return self.status.lower() in COMPLETED_STATUSES

    def init_metrics(self) -> dict[str, float]:
        """The `init_*` measurements: the epoch-0 history row's, else any the last metrics carry."""
        found = {k: v for k, v in self.metrics.items() if k.startswith(INIT_PREFIX)}
        for row in self.history:
            if row.get("epoch") == 0:
                found.update({k: v for k, v in row.items() if k.startswith(INIT_PREFIX)})
                break
        return {k: number for k, v in found.items() if (number := _number(v)) is not None}

    def get(self, key: str | None) -> float | None:
        """A metric by name: `primary` (or None) is the primary test metric; `init_*` the init measurements."""
        if key is None or key == PRIMARY:
            return _number(self.value)
        if key.startswith(INIT_PREFIX):
            return self.init_metrics().get(key)
        return _number(self.metrics.get(key))

    def knob(self, name: str) -> Any:
        """A knob's value: from the trial's knobs, else from its grid label (then a string)."""
        if name in self.knobs:
            return self.knobs[name]
        return parse_group_label(self.group).get(name)

    @property
    def label(self) -> str:
        return self.method if self.group is None else f"{self.method} [{self.group}]"


def same_value(actual: Any, wanted: Any) -> bool:
    """A knob value equals a wanted one: numerically when both read as numbers ("10" == 10), else as text."""
    if actual is None:
        return False
    a, b = _number(actual), _number(wanted)
    if a is None and isinstance(actual, str):
        try:
            a = float(actual)
        except ValueError:
            a = None
    if a is not None and b is not None:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return str(actual) == str(wanted)


def matches(trial: TrialData, selector: Selector) -> bool:
    for key, wanted in selector.items():
        actual = trial.method if key == "method" else trial.knob(key)
        if not same_value(actual, wanted):
            return False
    return True


def select(trials: Iterable[TrialData], selector: Selector | str) -> list[TrialData]:
    """The trials a selector picks; a plain string selects a method."""
    chosen = {"method": selector} if isinstance(selector, str) else selector
    return [t for t in trials if matches(t, chosen)]


def describe_selector(selector: Selector | str) -> str:
    """ "autonorm_s" or "autonorm_s [tau=0.5]" for a selector, as results tables label rows."""
    if isinstance(selector, str):
        return selector
    method = selector.get("method")
    knobs = ",".join(f"{k}={v}" for k, v in selector.items() if k != "method")
    if method is None:
        return knobs or "all trials"
    return f"{method} [{knobs}]" if knobs else str(method)


@dataclass(frozen=True)
class StudyData:
    """What every check receives: the study's final or grid trials and how to read its primary metric."""

    dataset: str
    metric: str  # primary test metric name, e.g. test_accuracy
    higher_is_better: bool
    reference: str  # the spec's reference method
    trials: tuple[TrialData, ...]
    # A sequential study: each comparison as its looks decided it, by name (studies.claims.sequential);
    # None for fixed seeds, whose checks test the seeds they find.
    sequential: Mapping[str, SequentialComparison] | None = None

    def completed(self) -> list[TrialData]:
        return [t for t in self.trials if t.completed]

    def metric_name(self, key: str | None) -> str:
        return self.metric if key is None or key == PRIMARY else key

    def direction(self, key: str | None) -> bool:
        """Whether higher is better for a metric: the primary one's is known; names hint the others."""
        if key is None or key == PRIMARY or key == self.metric:
            return self.higher_is_better
        return metric_direction(key, default=self.higher_is_better)

    def arm(self, selector: Selector | str) -> str | None:
        """The one row a selector picks, as results tables label it ("autonorm_s", "autonorm_s
        [post_freeze_gate=hard]"); None when it picks no trial or trials of several rows."""
        labels = {trial.label for trial in select(self.trials, selector)}
        return labels.pop() if len(labels) == 1 else None

    def by_seed(self, selector: Selector | str, key: str | None) -> dict[int, float | None]:
        """{seed: value} of the completed trials a selector picks (the last one per seed wins)."""
        values: dict[int, float | None] = {}
        for trial in select(self.completed(), selector):
            values[int(trial.seed)] = trial.get(key)
        return values


_LOWER_IS_BETTER_HINTS = ("rmse", "mse", "mae", "loss", "perplexity", "error")


def metric_direction(key: str, *, default: bool = True) -> bool:
    """True when higher is better for a metric name (accuracy, erank), False for errors and losses."""
    lowered = key.lower()
    if any(hint in lowered for hint in _LOWER_IS_BETTER_HINTS):
        return False
    if "acc" in lowered:
        return True
    return default
