"""Which final trials a compare study runs, and when: every seed at once, or look by look.

`StudySearch` (workers.driver.method_search) asks its schedule for a method's next final trial once the
method's tuning has ended, and tells it when a final trial ends. Two schedules:

- `FixedFinals`: every method on every final seed batch (a spec's `seeds` list), as before;
- `SequentialFinals`: a spec's `sequential` design. Every method trains the first look's seeds; when every
  final trial of a look has ended (finished or failed for good after Tune's retries), the look's
  `SequentialMonitor` decides each comparison with the reference from the seeds' test metric, the look is
  handed to a `LookSink` (stored and logged), and only the arms with an open comparison (and the
  reference, while one is open) train the next look's seeds. A failed trial's seeds are simply missing
  from the look: it is counted as failed in the store, never as a decision.

Both are plain data that Tune pickles with the search (a restored driver goes on from its last saved
state: a look it had not saved is analysed again from the same results, and the store keeps the record it
already had).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from studies.sequential import LookRecord, SequentialMonitor
from studies.trial_config import PER_SEED, trial_seeds
from workers.trials.plan import seed_batches

__all__ = ["FinalSchedule", "FixedFinals", "SequentialFinals", "seed_values"]

log = logging.getLogger(__name__)

# Builds a final trial's phase, seed and split fields for one seed batch (StudyTrialConfigs.final_for).
FinalConfig = Callable[[Sequence[int]], dict[str, Any]]


class FinalSchedule(Protocol):
    @property
    def most_trials(self) -> int:
        """The most final trials the study can run (the Tune experiment's share of num_samples)."""
        ...

    def next_config(self, method: str) -> dict[str, Any] | None:
        """The method's next final trial's fields, None when it has none to start now."""
        ...

    def waiting(self) -> bool:
        """Whether final trials may still come (True: the search waits; False: it is finished)."""
        ...

    def on_final_suggested(self, trial_id: str, method: str, config: Mapping[str, Any]) -> None: ...

    def on_final_complete(self, trial_id: str, result: Mapping[str, Any] | None, error: bool) -> None: ...


class FixedFinals:
    """Every method's final trials on every seed batch of the spec's seeds."""

    def __init__(self, configs: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> None:
        self._configs = [dict(c) for c in configs]
        self._suggested = {m: 0 for m in methods}

    @property
    def most_trials(self) -> int:
        return len(self._suggested) * len(self._configs)

    def next_config(self, method: str) -> dict[str, Any] | None:
        index = self._suggested[method]
        if index >= len(self._configs):
            return None
        self._suggested[method] += 1
        return dict(self._configs[index])

    def waiting(self) -> bool:
        return any(n < len(self._configs) for n in self._suggested.values())

    def on_final_suggested(self, trial_id: str, method: str, config: Mapping[str, Any]) -> None:
        pass

    def on_final_complete(self, trial_id: str, result: Mapping[str, Any] | None, error: bool) -> None:
        pass


class LookSink(Protocol):
    def __call__(self, record: LookRecord, monitor: SequentialMonitor) -> None: ...


class SequentialFinals:
    """Final trials look by look under a sequential design (see the module docstring)."""

    def __init__(
        self,
        monitor: SequentialMonitor,
        *,
        final_config: FinalConfig,
        seeds_per_trial: int,
        metric_key: str,
        sink: LookSink,
    ) -> None:
        self.monitor = monitor
        self._final_config = final_config
        self._per_trial = seeds_per_trial
        self._metric_key = metric_key
        self._sink = sink
        self._values: dict[str, dict[int, float]] = {m: {} for m in monitor.methods}
        self._queue: dict[str, list[list[int]]] = {}  # method -> seed batches of this look not suggested yet
        self._running: dict[str, tuple[str, list[int]]] = {}  # trial id -> (method, seeds)
        self._open_look(monitor.methods, monitor.design.seeds_added_at(0))

    @property
    def most_trials(self) -> int:
        design = self.monitor.design
        batches = sum(
            len(seed_batches(design.seeds_added_at(k), self._per_trial)) for k in range(len(design.looks()))
        )
        return len(self.monitor.methods) * batches

    def _open_look(self, arms: Sequence[str], seeds: Sequence[int]) -> None:
        batches = seed_batches(seeds, self._per_trial)
        self._queue = {m: [list(b) for b in batches] for m in arms}
        log.info(
            "look %d of %d: %s train seeds %s",
            self.monitor.looks_taken + 1,
            len(self.monitor.design.looks()),
            ", ".join(arms),
            list(seeds),
        )

    def next_config(self, method: str) -> dict[str, Any] | None:
        batches = self._queue.get(method)
        if not batches:
            return None
        return self._final_config(batches.pop(0))

    def waiting(self) -> bool:
        return bool(self._running) or any(self._queue.values())

    def on_final_suggested(self, trial_id: str, method: str, config: Mapping[str, Any]) -> None:
        self._running[trial_id] = (method, trial_seeds(config))

    def on_final_complete(self, trial_id: str, result: Mapping[str, Any] | None, error: bool) -> None:
        entry = self._running.pop(trial_id, None)
        if entry is None:
            return
        method, seeds = entry
        if not error:
            self._values[method].update(seed_values(seeds, result, self._metric_key))
        if self._running or any(self._queue.values()):
            return  # the look waits for every trial of its batch
        record = self.monitor.look({m: dict(v) for m, v in self._values.items()})
        self._sink(record, self.monitor)
        arms, seeds = self.monitor.open_arms(), self.monitor.next_seeds()
        if arms and seeds:
            self._open_look(arms, seeds)


def seed_values(seeds: Sequence[int], result: Mapping[str, Any] | None, metric_key: str) -> dict[int, float]:
    """Each seed's finite `metric_key` from a final trial's last result: the result itself for one seed, its
    `per_seed` part (nested, or flattened by Tune as `per_seed/<seed>/<key>`) for a seed batch."""
    result = result or {}
    if len(seeds) == 1:
        parts = {seeds[0]: result}
    else:
        nested = result.get(PER_SEED)
        # Tune hands a searcher the flattened result (per_seed/<seed>/<key>); a callback sees it nested.
        parts = {
            seed: (nested.get(str(seed)) or {})
            if isinstance(nested, Mapping)
            else {metric_key: result.get(f"{PER_SEED}/{seed}/{metric_key}")}
            for seed in seeds
        }
    values = {}
    for seed, part in parts.items():
        value = part.get(metric_key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
            values[int(seed)] = float(value)
    return values
