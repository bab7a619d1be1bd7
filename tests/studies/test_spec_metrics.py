"""The metric table (studies.spec.metrics): every metric a trial reports that a results table can compare
has its direction, per dataset, taken from the dataset's primary metric; a metric without one is an error
that names the known ones, never a guess from its name."""

from __future__ import annotations

import pytest

from studies.spec import (
    DATASET_CORRUPTIONS,
    DATASET_METRICS,
    KNOWN_DATASETS,
    METRIC_DIRECTIONS,
    UnknownMetricError,
    higher_is_better,
    known_metrics,
)


@pytest.mark.parametrize("dataset", KNOWN_DATASETS)
def test_the_primary_metric_has_the_datasets_direction_on_every_split(dataset):
    primary, higher = DATASET_METRICS[dataset]
    for metric in (primary, f"val_{primary}", f"test_{primary}", "objective"):
        assert higher_is_better(dataset, metric) is higher, metric


@pytest.mark.parametrize("dataset", KNOWN_DATASETS)
def test_training_cost_and_loss_have_the_same_direction_on_every_dataset(dataset):
    assert higher_is_better(dataset, "train_loss") is False
    assert higher_is_better(dataset, "epoch_time_s") is False
    assert higher_is_better(dataset, "epoch_cpu_s") is False
    assert higher_is_better(dataset, "samples_per_s") is True


def test_lower_is_better_for_perplexity_and_rmse_datasets():
    assert higher_is_better("ptb_lm", "test_perplexity") is False
    assert higher_is_better("energy", "val_rmse") is False
    assert higher_is_better("cifar10", "test_accuracy") is True


@pytest.mark.parametrize("dataset", sorted(DATASET_CORRUPTIONS))
def test_every_corruption_metric_the_training_loop_reports_has_a_direction(dataset):
    # The keys as the workers build them: one eval set per corruption and severity, then their mean.
    from workers.data.corruptions import eval_set_key
    from workers.training.run_parts import test_metrics, validation_metrics

    primary, higher = DATASET_METRICS[dataset]
    for several in (False, True):
        corrupted = {
            eval_set_key(name, severity, several_severities=several): 0.5
            for name in DATASET_CORRUPTIONS[dataset]
            for severity in range(1, 6)
        }
        reported = {**validation_metrics(primary, 0.5), **test_metrics(primary, 0.5, corrupted)}
        assert {key: higher_is_better(dataset, key) for key in reported} == dict.fromkeys(reported, higher)


def test_a_dataset_without_corruption_sets_has_no_corruption_metrics():
    assert not any("corruption" in metric for metric in known_metrics("digits"))
    assert "test_accuracy_corruption_mean" in known_metrics("digits_c")


@pytest.mark.parametrize(
    "metric", ["gate_entropy_mean", "gate_dyt_weight_0", "lr", "epoch", "init_erank_jacobian"]
)
def test_recorded_metrics_without_a_better_direction_are_not_in_the_table(metric):
    assert ("cifar10", metric) not in METRIC_DIRECTIONS


def test_an_unknown_metric_names_the_known_ones_instead_of_guessing_from_its_name():
    with pytest.raises(UnknownMetricError) as raised:
        higher_is_better("digits", "test_error_rate")  # "error" once meant lower-is-better by its name
    message = str(raised.value)
    assert "'test_error_rate'" in message and "'digits'" in message
    assert (
        "known metrics: accuracy, epoch_cpu_s, epoch_time_s, objective, samples_per_s, test_accuracy"
        in message
    )
    assert raised.value.known == known_metrics("digits")


def test_an_unknown_dataset_names_the_known_datasets():
    with pytest.raises(UnknownMetricError, match="unknown dataset 'imagenet'; known datasets: mnist"):
        higher_is_better("imagenet", "test_accuracy")
