"""A compare study's tune and final phases as ONE Ray Tune experiment, each method with its own search.

One experiment per method and phase lost the trial processes (imports, loaded data, warmed-up torch) and
left CPU slots idle at every boundary: on 2 cores a fresh trial process costs more than a whole quick-study
trial trains. In one experiment Tune hands each finished trial's process to the next trial (reuse_actors),
whatever its method or phase. The science is unchanged:

- tuning: each method is searched by its own Optuna sampler (`make_sampler()`, seeded with the tune seed
  as before), its samples suggested one method after the other; under ASHA each method keeps its own
  rungs (MethodScheduler), so a trial is only ever stopped against trials of its own method;
- final: once every tuning trial of a method has ended, its best knobs (best last-reported `metric`, the
  first on a tie, as Tune's `get_best_result(scope="last")`) run on its final seeds, never stopped early:
  every seed of the spec, or look by look under a sequential design (workers.driver.final_schedule).
  A method without searchable knobs goes straight to its final trials. All tuning trials are suggested
  before any final trial, so the independent final trials fill the end of the study.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from optuna.distributions import BaseDistribution
from ray.tune.schedulers import FIFOScheduler, TrialScheduler
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from studies.numbers import is_finite_number
from studies.trial_config import TUNE_PHASE, Key
from workers.driver.final_schedule import FinalSchedule

__all__ = ["MethodScheduler", "StudySearch"]


class StudySearch(Searcher):
    """Suggests every trial of a compare study (see the module docstring).

    methods: all methods of the study, in order. spaces: the tuned methods' knob spaces as
    `workers.driver.search_space.to_tune_space` returns them (Optuna distributions for searched knobs,
    plain values for fixed ones); num_samples: tuning trials per tuned method. fixed_knobs: the knobs of
    the methods that are not tuned. tune_config: what every tuning trial adds to its config (phase, seed,
    split); finals: which final trials (phase, seeds, split) each method runs, and when.
    """

    def __init__(
        self,
        *,
        methods: Sequence[str],
        spaces: Mapping[str, Mapping[str, Any]],
        num_samples: Mapping[str, int],
        fixed_knobs: Mapping[str, Mapping[str, Any]],
        tune_config: Mapping[str, Any],
        finals: FinalSchedule,
        metric: str,
        mode: str,
        make_sampler: Callable[[], Any],
    ) -> None:
        if set(spaces) != set(num_samples) or set(spaces) | set(fixed_knobs) != set(methods):
            raise ValueError("every method needs a space and a sample count, or fixed knobs")
        super().__init__(metric=metric, mode=mode)
        self._methods = list(methods)
        self._fixed = {
            m: dict(fixed_knobs[m]) if m in fixed_knobs else _constants(spaces[m]) for m in methods
        }
        self._searches = {
            m: OptunaSearch(
                # Flat "knobs/<name>" keys: OptunaSearch nests each suggestion under config["knobs"].
                space={f"{Key.KNOBS}/{k}": v for k, v in space.items() if isinstance(v, BaseDistribution)},
                metric=metric,
                mode=mode,
                sampler=make_sampler(),
            )
            for m, space in spaces.items()
        }
        self._tune_config = dict(tune_config)
        self._finals = finals
        self._to_suggest = {m: int(num_samples.get(m, 0)) for m in methods}
        self._total = sum(self._to_suggest.values()) + finals.most_trials
        self._open: dict[str, set[str]] = {m: set() for m in methods}  # tuning trials not ended yet
        self._method_of: dict[str, str] = {}
        self._last: dict[str, float] = {}  # tuning trial -> its last finite `metric`
        self._best: dict[str, tuple[float, dict[str, Any]]] = {}  # method -> (value, knobs)
        self._knobs_of: dict[str, dict[str, Any]] = {}

    @property
    def total_trials(self) -> int:
        """Tuning plus final trials: the experiment's num_samples."""
        return self._total

    def best_knobs(self, method: str) -> dict[str, Any] | None:
        """The knobs a method's final trials run with (None until its tuning has ended)."""
        if method not in self._searches:
            return dict(self._fixed[method])
        if self._to_suggest[method] or self._open[method]:
            return None
        if method not in self._best:
            raise RuntimeError(f"no tuning trial of method {method} reported a finite {self._metric}")
        return dict(self._best[method][1])

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        # The spaces are per method and fixed at construction; the experiment's param space holds constants.
        return True

    # Ray's annotation says dict | None, but its Searcher protocol also takes Searcher.FINISHED (a str).
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        # Tuning first: a method's final trials wait for its whole tuning, so tuning late would leave slots
        # idle at the end of the study; final trials are independent and fill whatever is left.
        method = next((m for m in self._methods if self._to_suggest[m] > 0), None)
        if method is not None:
            return self._next_tuning(method, trial_id)
        for method in self._methods:
            knobs = self.best_knobs(method)
            if knobs is None:
                continue
            final = self._finals.next_config(method)
            if final is not None:
                config = {**final, Key.METHOD: method, Key.KNOBS: knobs}
                self._finals.on_final_suggested(trial_id, method, config)
                return config
        # None: wait for tuning trials, or for the final trials a look waits for, still running.
        return None if self._finals.waiting() else Searcher.FINISHED

    def _next_tuning(self, method: str, trial_id: str) -> dict[str, Any]:
        sampled = self._searches[method].suggest(trial_id) or {}
        self._to_suggest[method] -= 1
        self._open[method].add(trial_id)
        self._method_of[trial_id] = method
        knobs = {**self._fixed[method], **sampled.get(Key.KNOBS, {})}
        self._knobs_of[trial_id] = knobs
        return {**self._tune_config, Key.METHOD: method, Key.KNOBS: knobs}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id in self._method_of:
            self._remember(trial_id, result)
            self._searches[self._method_of[trial_id]].on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        method = self._method_of.get(trial_id)
        if method is None:
            self._finals.on_final_complete(trial_id, result, error)  # a final trial: a look may be complete
            return
        self._remember(trial_id, result)
        self._searches[method].on_trial_complete(trial_id, result=result, error=error)
        self._open[method].discard(trial_id)
        value = self._last.get(trial_id)
        if value is not None and (method not in self._best or self._better(value, self._best[method][0])):
            self._best[method] = (value, self._knobs_of[trial_id])

    def _remember(self, trial_id: str, result: Mapping[str, Any] | None) -> None:
        value = None if self._metric is None else (result or {}).get(self._metric)
        if is_finite_number(value):
            self._last[trial_id] = float(value)

    def _better(self, value: float, than: float) -> bool:
        return value > than if self._mode == "max" else value < than

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as handle:
            pickle.dump(self.__dict__, handle)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as handle:
            self.__dict__.update(pickle.load(handle))


class MethodScheduler(FIFOScheduler):
    """One trial scheduler per method (e.g. ASHA) for the tuning trials, each seeing only its method's;
    every other trial (the final phase) runs to the end. Trials start in submission order."""

    def __init__(self, schedulers: Mapping[str, TrialScheduler]) -> None:
        super().__init__()
        self._schedulers = dict(schedulers)
        self._to_the_end = FIFOScheduler()
        self._supports_buffered_results = all(s.supports_buffered_results for s in self._schedulers.values())

    def _of(self, trial: Any) -> TrialScheduler:
        if trial.config.get(Key.PHASE, TUNE_PHASE) != TUNE_PHASE:
            return self._to_the_end
        return self._schedulers[trial.config[Key.METHOD]]

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        accepted = [s.set_search_properties(metric, mode, **spec) for s in self._schedulers.values()]
        self._metric = next(iter(self._schedulers.values())).metric
        return all(accepted)

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self._of(trial).on_trial_add(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        self._of(trial).on_trial_error(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        return self._of(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        self._of(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        self._of(trial).on_trial_remove(tune_controller, trial)

    def debug_string(self) -> str:
        return "\n".join(f"{m}: {s.debug_string()}" for m, s in self._schedulers.items())

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as handle:
            pickle.dump(self.__dict__, handle)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as handle:
            self.__dict__.update(pickle.load(handle))


def _constants(space: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in space.items() if not isinstance(v, BaseDistribution)}
