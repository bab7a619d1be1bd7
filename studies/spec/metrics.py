"""Which way is better, for every metric a trial of each dataset records that a results table can compare.

The one table of metric directions: keyed by (dataset, metric) -> higher_is_better. The service's results
route, its study results and its reports read directions here and nowhere else, so a metric never gets its
direction from a guess at its name. It is computed from the dataset records (studies.datasets) at each
lookup, so a plugin's datasets have their directions too.

Per dataset, from its record's primary metric `m` and the keys the training loop reports
(workers.training.run_parts, workers.data.corruptions.eval_set_key):

    m, val_m, test_m, objective           the primary metric (as tables name it), on validation and test
    test_m_<corruption>[_s<severity>]     per corruption eval set (corruption datasets only)
    test_m_corruption_mean                their mean (corruption datasets only)
    train_loss                            lower is better
    epoch_time_s, epoch_cpu_s / samples_per_s   a trial's cost (wall, CPU of its training thread):
                                          lower / higher is better

Gate statistics, ranks, the learning rate and the epoch are recorded too, but have no better direction:
they are not in the table, and asking for one is an UnknownMetricError that lists the known ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from studies.datasets import dataset_names, dataset_record

__all__ = ["METRIC_DIRECTIONS", "UnknownMetricError", "higher_is_better", "known_metrics"]

# DataOptions.severities admits 1..5; several chosen severities name each eval set `<corruption>_s<k>`.
_SEVERITIES = range(1, 6)

# Metrics every dataset's trials record, whatever the task (True: higher is better).
_TRAINING_METRICS = {"train_loss": False, "epoch_time_s": False, "epoch_cpu_s": False, "samples_per_s": True}


class UnknownMetricError(LookupError):
    """A (dataset, metric) the table has no direction for; the message names the dataset's known metrics."""

    def __init__(self, dataset: str, metric: str) -> None:
        self.dataset = dataset
        self.metric = metric
        self.known = known_metrics(dataset)
        if not self.known:
            message = f"unknown dataset '{dataset}'; known datasets: {', '.join(dataset_names())}"
        else:
            message = (
                f"no better direction is known for metric '{metric}' of dataset '{dataset}'; "
                f"known metrics: {', '.join(self.known)}"
            )
        super().__init__(message)

    def __str__(self) -> str:  # LookupError would quote the message like a KeyError
        return str(self.args[0])


def _directions(dataset: str) -> dict[str, bool]:
    """Every metric of `dataset` with its direction; empty for a dataset the registry does not hold."""
    try:
        record = dataset_record(dataset)
    except KeyError:  # normlab.UnknownName
        return {}
    primary, higher = record.metric, record.higher_is_better
    directions = {
        primary: higher,
        f"val_{primary}": higher,
        f"test_{primary}": higher,
        "objective": higher,  # the tune phase's objective is the validation metric
    }
    for corruption in record.corruptions:
        directions[f"test_{primary}_{corruption}"] = higher
        directions.update({f"test_{primary}_{corruption}_s{s}": higher for s in _SEVERITIES})
    if record.corruptions:
        directions[f"test_{primary}_corruption_mean"] = higher
    return {**directions, **_TRAINING_METRICS}


class _MetricDirections(Mapping[tuple[str, str], bool]):
    """(dataset, metric) -> higher_is_better, read from the dataset records at each lookup (a plugin's
    datasets included): a view, not a table."""

    def __getitem__(self, key: tuple[str, str]) -> bool:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise KeyError(key)
        return _directions(key[0])[key[1]]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter([(dataset, metric) for dataset in dataset_names() for metric in _directions(dataset)])

    def __len__(self) -> int:
        return sum(len(_directions(dataset)) for dataset in dataset_names())


METRIC_DIRECTIONS: Mapping[tuple[str, str], bool] = _MetricDirections()


def higher_is_better(dataset: str, metric: str) -> bool:
    """Whether a higher `metric` is better on `dataset`; UnknownMetricError for a pair the table lacks."""
    try:
        return _directions(dataset)[metric]
    except KeyError:
        raise UnknownMetricError(dataset, metric) from None


def known_metrics(dataset: str) -> tuple[str, ...]:
    """The metrics of `dataset` the table knows a direction for, sorted (none for an unknown dataset)."""
    return tuple(sorted(_directions(dataset)))
