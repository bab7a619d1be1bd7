"""AutoNorm's mechanism, trial by trial (science.md section 1): did AutoNorm-S's gate freeze fire and when,
how the gate entropy moved against eps_H, and how noisy the selectors' gradient was, per method and seed.

Pure Python over the per-epoch history the training loop stores (no torch, no FastAPI, no pydantic):
`mechanism_summary(study)` reads a study's trials (`studies.claims.trials.StudyData` or any iterable of
its `TrialData`) and returns a `MechanismSummary`, one `MethodMechanism` per row label (method, or
"method [group]" for a grid point) holding one `SeedMechanism` per trial. The figures are
`studies.tables.render_mechanism_svg`.

What each history row holds (workers/training/loop.py, README "AutoNorm-S gate freeze"):
- `train_gate_entropy_mean` (the epoch's training batches) and `gate_entropy_mean` (the validation
  split): the mean noise-free gate entropy over layers. The trajectory shown is the one the trial's
  freeze rule watched (knob `freeze_signal`, default train), so it is the one to read against eps_H; a
  history without it (a run from before that metric) falls back to the other, and says so (`entropy_key`).
- `selector_grad_var`: the variance across the epoch's steps of the selectors' gradient (defined in
  workers.training.metrics.SelectorGradVariance); absent in an epoch where no selector trained (after
  a global freeze) and in runs from before the metric: both read as None here, never as 0.
- `gates_frozen` / `freeze_epoch`: whether (any) selector is frozen, and the epoch after which it froze
  (-1: none).
eps_H, T_freeze and the post-freeze gate come from the trial's knobs; where a knob was not set the
training defaults apply (studies.knobs), and `defaulted` names the knobs that were filled in that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

# ENTROPY_KEYS and SELECTOR_GRAD_VAR name what the training loop writes (re-exported: callers read them here).
from studies.epoch_metrics import ENTROPY_KEYS, SELECTOR_GRAD_VAR
from studies.knobs import DEFAULT_EPS_H, DEFAULT_FREEZE_SCOPE, DEFAULT_FREEZE_SIGNAL, DEFAULT_T_FREEZE
from studies.methods import FREEZING_METHODS, GATED_METHODS
from studies.numbers import finite_or_none
from studies.records import row_label

if TYPE_CHECKING:
    from studies.claims.trials import StudyData, TrialData

__all__ = [
    "ENTROPY_KEYS",
    "GATED_METHODS",
    "SELECTOR_GRAD_VAR",
    "MechanismSummary",
    "MethodMechanism",
    "SeedMechanism",
    "mechanism_summary",
    "seed_mechanism",
]

_MECHANISM_KEYS = (*ENTROPY_KEYS.values(), SELECTOR_GRAD_VAR)


@dataclass(frozen=True)
class SeedMechanism:
    """One trial's mechanism: per-epoch series aligned with `epochs`, the freeze, and the knobs."""

    method: str
    group: str | None  # grid-point label; None in compare studies
    seed: int
    trial_key: str
    completed: bool
    epochs: tuple[int, ...]  # every epoch the history holds, ascending (0 = before training)
    entropy: tuple[float | None, ...]  # layer-mean gate entropy per epoch (the `entropy_key` metric)
    entropy_key: str | None  # which metric `entropy` is (None: the history has no gate entropy)
    selector_grad_var: tuple[float | None, ...]  # per epoch; None where not reported (frozen, or older run)
    froze: bool  # whether any selector was frozen by the end of the history
    freeze_epoch: int | None  # the epoch after which the freeze was applied; None when it never fired
    # Whether the freeze rule has had its say: the history reaches epoch t_freeze (autonorm_s only; None
    # for methods without the schedule). A trial that stopped earlier neither froze nor stayed unfrozen.
    freeze_decided: bool | None
    eps_h: float | None  # the entropy threshold the trial ran with (None without the freeze schedule)
    t_freeze: int | None  # the last watched epoch (None without the freeze schedule)
    freeze_signal: str | None  # "train" or "val" (None without the freeze schedule)
    freeze_scope: str | None  # "global" or "per_layer" (None without the freeze schedule)
    post_freeze_gate: str | None  # "sample", "expected" or "hard" (None without the freeze schedule)
    defaulted: tuple[str, ...] = ()  # knobs above not set on the trial: the training defaults filled in

    @property
    def label(self) -> str:
        return row_label(self.method, self.group)

    def series(self, quantity: str) -> list[tuple[int, float]]:
        """(epoch, value) of "entropy" or "selector_grad_var", where a value was reported."""
        values = self.entropy if quantity == "entropy" else self.selector_grad_var
        return [(e, v) for e, v in zip(self.epochs, values, strict=True) if v is not None]


@dataclass(frozen=True)
class MethodMechanism:
    """One row label's trials (one per seed), in seed order."""

    label: str
    method: str
    seeds: tuple[SeedMechanism, ...]

    @property
    def n_frozen(self) -> int:
        return sum(1 for seed in self.seeds if seed.froze)

    @property
    def freeze_epochs(self) -> dict[int, int | None]:
        """{seed: epoch after which it froze, or None}."""
        return {seed.seed: seed.freeze_epoch for seed in self.seeds}

    @property
    def has_freeze_schedule(self) -> bool:
        return any(seed.t_freeze is not None for seed in self.seeds)


@dataclass(frozen=True)
class MechanismSummary:
    """Every gated row label of a study, in order of first appearance."""

    methods: tuple[MethodMechanism, ...]

    def method(self, label: str) -> MethodMechanism | None:
        return next((m for m in self.methods if m.label == label), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "methods": [
                {
                    "label": m.label,
                    "method": m.method,
                    "n_frozen": m.n_frozen,
                    "seeds": [_seed_json(seed) for seed in m.seeds],
                }
                for m in self.methods
            ]
        }


def mechanism_summary(
    study: StudyData | Iterable[TrialData], *, include_incomplete: bool = False
) -> MechanismSummary:
    """Per row label (method, or method [group]) and seed, the mechanism of every gated trial: those of
    GATED_METHODS, and any other whose history reports a gate entropy or a selector gradient variance.
    Completed trials only unless `include_incomplete` (then `completed` tells them apart)."""
    # Duck-typed: importing studies.claims here would pull its check registry (and pydantic) in.
    trials = cast("Iterable[TrialData]", getattr(study, "trials", study))
    grouped: dict[str, list[SeedMechanism]] = {}
    methods: dict[str, str] = {}
    for trial in trials:
        if not include_incomplete and not trial.completed:
            continue
        if trial.method not in GATED_METHODS and not _reports_mechanism(trial.history):
            continue
        seed = seed_mechanism(trial)
        grouped.setdefault(seed.label, []).append(seed)
        methods[seed.label] = trial.method
    return MechanismSummary(
        methods=tuple(
            MethodMechanism(
                label=label, method=methods[label], seeds=tuple(sorted(seeds, key=lambda s: s.seed))
            )
            for label, seeds in grouped.items()
        )
    )


def seed_mechanism(trial: TrialData) -> SeedMechanism:
    """One trial's `SeedMechanism` from its history (falling back on its last metrics) and knobs."""
    rows = _rows_by_epoch(trial.history, trial.metrics)
    epochs = tuple(sorted(rows))
    knobs, defaulted = _freeze_knobs(trial) if trial.method in FREEZING_METHODS else ({}, ())
    signal = knobs.get("freeze_signal") or "train"
    entropy_key = _entropy_key(rows, str(signal))
    froze, freeze_epoch = _freeze_state(rows, epochs)
    t_freeze = knobs.get("t_freeze")
    return SeedMechanism(
        method=trial.method,
        group=trial.group,
        seed=int(trial.seed),
        trial_key=trial.trial_key,
        completed=trial.completed,
        epochs=epochs,
        entropy=tuple(finite_or_none(rows[e].get(entropy_key)) if entropy_key else None for e in epochs),
        entropy_key=entropy_key,
        selector_grad_var=tuple(finite_or_none(rows[e].get(SELECTOR_GRAD_VAR)) for e in epochs),
        froze=froze,
        freeze_epoch=freeze_epoch,
        freeze_decided=None if t_freeze is None else (bool(epochs) and epochs[-1] >= t_freeze),
        eps_h=knobs.get("eps_h"),
        t_freeze=t_freeze,
        freeze_signal=knobs.get("freeze_signal"),
        freeze_scope=knobs.get("freeze_scope"),
        post_freeze_gate=knobs.get("post_freeze_gate"),
        defaulted=defaulted,
    )


# ----- helpers --------------------------------------------------------------------------------------------

# knob -> (parse, what a trial runs with where its spec does not set it): studies.knobs' freeze schedule
# defaults (which TrainConfig reads too) and AutoNorm's post-freeze gate (models.norms.autonorm).
_FREEZE_KNOBS: dict[str, tuple[Any, Any]] = {
    "t_freeze": (lambda v: int(float(v)), DEFAULT_T_FREEZE),
    "eps_h": (float, DEFAULT_EPS_H),
    "freeze_signal": (str, DEFAULT_FREEZE_SIGNAL),
    "freeze_scope": (str, DEFAULT_FREEZE_SCOPE),
    "post_freeze_gate": (str, "sample"),
}


def _freeze_knobs(trial: TrialData) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The freeze knobs the trial ran with (grid labels give text: parsed), and those that defaulted."""
    values: dict[str, Any] = {}
    defaulted = []
    for name, (parse, default) in _FREEZE_KNOBS.items():
        raw = trial.knob(name)
        if raw is None:
            values[name] = default
            defaulted.append(name)
            continue
        try:
            values[name] = parse(raw)
        except (TypeError, ValueError):
            values[name] = None  # unreadable: shown as unknown rather than guessed
    return values, tuple(defaulted)


def _rows_by_epoch(
    history: Sequence[Mapping[str, Any]], last: Mapping[str, Any]
) -> dict[int, Mapping[str, Any]]:
    """{epoch: metrics}; the last reported row wins for a repeated epoch (a resumed trial re-reports).
    Without a history, the last metrics stand for their own epoch."""
    rows: dict[int, Mapping[str, Any]] = {}
    for row in history or ([last] if last else []):
        epoch = finite_or_none(row.get("epoch"))
        if epoch is not None and epoch == int(epoch):
            rows[int(epoch)] = row
    return rows


def _entropy_key(rows: Mapping[int, Mapping[str, Any]], signal: str) -> str | None:
    """The watched entropy metric; the other one when the history lacks it; None when it has neither."""
    wanted = ENTROPY_KEYS.get(signal, ENTROPY_KEYS["train"])
    for key in (wanted, *(k for k in ENTROPY_KEYS.values() if k != wanted)):
        if any(finite_or_none(row.get(key)) is not None for row in rows.values()):
            return key
    return None


def _freeze_state(rows: Mapping[int, Mapping[str, Any]], epochs: Sequence[int]) -> tuple[bool, int | None]:
    """(froze, freeze_epoch) from the latest row that reports the freeze (a freeze is never undone)."""
    for epoch in reversed(epochs):
        row = rows[epoch]
        frozen = finite_or_none(row.get("gates_frozen"))
        if frozen is None:
            continue
        at = finite_or_none(row.get("freeze_epoch"))
        freeze_epoch = int(at) if at is not None and at >= 1 else None
        return bool(frozen) or freeze_epoch is not None, freeze_epoch
    return False, None


def _reports_mechanism(history: Sequence[Mapping[str, Any]]) -> bool:
    return any(finite_or_none(row.get(key)) is not None for row in history for key in _MECHANISM_KEYS)


def _seed_json(seed: SeedMechanism) -> dict[str, Any]:
    return {
        "seed": seed.seed,
        "trial_key": seed.trial_key,
        "completed": seed.completed,
        "epochs": list(seed.epochs),
        "entropy": list(seed.entropy),
        "entropy_key": seed.entropy_key,
        "selector_grad_var": list(seed.selector_grad_var),
        "froze": seed.froze,
        "freeze_epoch": seed.freeze_epoch,
        "freeze_decided": seed.freeze_decided,
        "eps_h": seed.eps_h,
        "t_freeze": seed.t_freeze,
        "freeze_signal": seed.freeze_signal,
        "freeze_scope": seed.freeze_scope,
        "post_freeze_gate": seed.post_freeze_gate,
        "defaulted": list(seed.defaulted),
    }
