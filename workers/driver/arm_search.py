"""A sequential grid study's trials, look by look: each grid point is an arm of the design.

A fixed grid hands Tune every point x seed batch at once (`tune.grid_search`). Under a sequential design
the seeds of a look depend on the looks before it, so a searcher suggests them instead: `ArmSearch` asks
its `SequentialFinals` (workers.driver.final_schedule) for each arm's next seed batch, exactly as a compare
study's `StudySearch` does for its methods' final trials, and tells it when a trial ends, so a look is
taken once every trial of its batch has ended and only the arms still compared train the next one.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from typing import Any

from ray.tune.search import Searcher

from studies.trial_config import GRID_PHASE, Key, seed_fields
from workers.driver.final_schedule import SequentialFinals

__all__ = ["ArmSearch", "grid_seed_fields"]


def grid_seed_fields(batch: Sequence[int]) -> dict[str, Any]:
    """One grid trial's phase, seed and split fields for one seed batch (the test split, run to its end)."""
    return {Key.PHASE: GRID_PHASE, **seed_fields(batch), Key.EVAL_SPLIT: "test", Key.MAY_STOP_EARLY: False}


class ArmSearch(Searcher):
    """Suggests a sequential grid's trials (see the module docstring).

    arms: each arm's name (its results row, "method [point]") -> the fields that make a trial of it
    (method, grid label, knobs); finals: the design's look-by-look schedule over those names.
    """

    def __init__(
        self, *, arms: Mapping[str, Mapping[str, Any]], finals: SequentialFinals, metric: str, mode: str
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self._arms = {name: dict(fields) for name, fields in arms.items()}
        self._finals = finals

    @property
    def total_trials(self) -> int:
        """The most trials the design can run: the experiment's num_samples."""
        return self._finals.most_trials

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return True  # the arms are fixed at construction; the param space holds constants only

    # Ray's annotation says dict | None, but its Searcher protocol also takes Searcher.FINISHED (a str).
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        for name, fields in self._arms.items():
            seeds = self._finals.next_config(name)
            if seeds is not None:
                config = {**seeds, **fields}
                self._finals.on_final_suggested(trial_id, name, config)
                return config
        # None: a look waits for its batch's trials still running.
        return None if self._finals.waiting() else Searcher.FINISHED

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self._finals.on_final_complete(trial_id, result, error)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as handle:
            pickle.dump(self.__dict__, handle)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as handle:
            self.__dict__.update(pickle.load(handle))
