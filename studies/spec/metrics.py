"""Which way is better, for every metric a trial of each dataset records that a results table can compare.

The one table of metric directions: keyed by (dataset, metric) -> higher_is_better. The service's results
route, its study results and its reports read directions here and nowhere else, so a metric never gets its
direction from a guess at its name.

Per dataset, from its primary metric `m` (DATASET_METRICS) and the keys the training loop reports
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

from studies.datasets import DATASET_CORRUPTIONS, DATASET_METRICS, KNOWN_DATASETS

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
        self.known = known_metrics(dataset) if dataset in KNOWN_DATASETS else ()
        if not self.known:
            message = f"unknown dataset '{dataset}'; known datasets: {', '.join(KNOWN_DATASETS)}"
        else:
            message = (
                f"no better direction is known for metric '{metric}' of dataset '{dataset}'; "
                f"known metrics: {', '.join(self.known)}"
            )
        super().__init__(message)

    def __str__(self) -> str:  # LookupError would quote the message like a KeyError
        return str(self.args[0])


def _directions(dataset: str) -> dict[str, bool]:
    primary, higher = DATASET_METRICS[dataset]
    directions = {
        primary: higher,
        f"val_{primary}": higher,
        f"test_{primary}": higher,
        "objective": higher,  # the tune phase's objective is the validation metric
    }
    corruptions = DATASET_CORRUPTIONS.get(dataset, ())
    for corruption in corruptions:
        directions[f"test_{primary}_{corruption}"] = higher
        directions.update({f"test_{primary}_{corruption}_s{s}": higher for s in _SEVERITIES})
    if corruptions:
        directions[f"test_{primary}_corruption_mean"] = higher
    return {**directions, **_TRAINING_METRICS}


METRIC_DIRECTIONS: dict[tuple[str, str], bool] = {
    (dataset, metric): higher for dataset in KNOWN_DATASETS for metric, higher in _directions(dataset).items()
}


def higher_is_better(dataset: str, metric: str) -> bool:
    """Whether a higher `metric` is better on `dataset`; UnknownMetricError for a pair the table lacks."""
    try:
        return METRIC_DIRECTIONS[(dataset, metric)]
    except KeyError:
        raise UnknownMetricError(dataset, metric) from None


def known_metrics(dataset: str) -> tuple[str, ...]:
    """The metrics of `dataset` the table knows a direction for, sorted."""
    return tuple(sorted(metric for (name, metric) in METRIC_DIRECTIONS if name == dataset))
