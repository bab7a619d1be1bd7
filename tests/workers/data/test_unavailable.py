"""When a dataset is nowhere to be found the error says how to get it; stand-ins are never substituted."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.data import DATASETS, DataUnavailableError, get_dataset
from workers.data.registry import UNREGISTERED_PAPER_DATASETS


@pytest.fixture
def nothing_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NORMLAB_OFFLINE_DATA", str(tmp_path / "offline"))
    return tmp_path


@pytest.mark.parametrize("name", ["ptb_pos_sample", "ptb_lm_sample", "rotten_tomatoes_vader"])
def test_missing_offline_source_error_names_make_data_offline_and_the_cache_path(
    name: str, nothing_on_disk: Path
) -> None:
    with pytest.raises(DataUnavailableError) as raised:
        get_dataset(name, download=False)
    message = str(raised.value)
    assert "make data-offline" in message
    assert str(nothing_on_disk / "offline") in message
    assert str(nothing_on_disk / "data" / "datasets" / f"{name}.npz") in message


@pytest.mark.parametrize(
    "name", ["cifar10", "cifar10_c", "cifar10_c_hendrycks", "svhn", "sst2", "ptb_pos", "energy"]
)
def test_download_only_dataset_without_download_names_network_and_cache(
    name: str, nothing_on_disk: Path
) -> None:
    with pytest.raises(DataUnavailableError) as raised:
        get_dataset(name, download=False)
    message = str(raised.value)
    assert "download=False" in message
    assert "network" in message
    assert str(nothing_on_disk / "data" / "datasets") in message


def test_an_explicit_root_overrides_the_environment(nothing_on_disk: Path) -> None:
    with pytest.raises(
        DataUnavailableError, match=str(nothing_on_disk / "elsewhere" / "datasets" / "energy.npz")
    ):
        get_dataset("energy", root=nothing_on_disk / "elsewhere", download=False)


def test_unknown_dataset_names_the_registered_ones() -> None:
    with pytest.raises(KeyError, match="fashion_mnist"):
        get_dataset("imagenet")


def test_every_stand_in_has_its_own_name_and_points_at_the_paper_dataset() -> None:
    stand_ins = {name: info.stand_in_for for name, info in DATASETS.items() if info.stand_in_for}
    assert stand_ins == {
        "digits": "mnist",
        "mnist_5k": "mnist",
        "cifar10_c": "cifar10_c_hendrycks",
        "fashion_mnist_c": "cifar10_c_hendrycks",
        "digits_c": "cifar10_c_hendrycks",
        "ptb_pos": "ptb_wsj_pos",
        "ptb_pos_sample": "ptb_wsj_pos",
        "ptb_lm_sample": "ptb_lm",
        "rotten_tomatoes_vader": "sst2",
    }
    for name, target in stand_ins.items():
        assert target != name
        if target in UNREGISTERED_PAPER_DATASETS:  # licensed: no loader, so no registry entry
            assert target not in DATASETS
            continue
        assert target in DATASETS and DATASETS[target].stand_in_for is None
        assert DATASETS[name].task == DATASETS[target].task
        assert DATASETS[name].metric == DATASETS[target].metric


def test_every_stand_in_says_what_it_stands_in_for_and_what_it_is() -> None:
    for name, info in DATASETS.items():
        if info.stand_in_for is None:
            assert info.stand_in_note is None, name
            continue
        assert info.stand_in_note is not None
        assert info.stand_in_note.startswith(f"stand-in for {info.stand_in_for}")
        assert info.stand_in_note.endswith(info.description)
    assert "LDC99T42" in DATASETS["ptb_pos"].stand_in_note
    assert "batterydata/pos_tagging" in DATASETS["ptb_pos"].description
    assert "CoNLL-2003" in DATASETS["ptb_pos"].description
    assert "8 of the 19" in DATASETS["cifar10_c"].description


def test_paper_datasets_are_all_registered_with_their_task_and_metric() -> None:
    expected = {
        "mnist": ("image_classification", "accuracy"),
        "fashion_mnist": ("image_classification", "accuracy"),
        "svhn": ("image_classification", "accuracy"),
        "cifar10": ("image_classification", "accuracy"),
        "cifar100": ("image_classification", "accuracy"),
        "cifar10_c_hendrycks": ("image_classification", "accuracy"),
        "ptb_lm": ("language_modeling", "perplexity"),
        "sst2": ("sequence_classification", "accuracy"),
        "energy": ("regression", "rmse"),
        "california_housing": ("regression", "rmse"),
    }
    for name, (task, metric) in expected.items():
        info = DATASETS[name]
        assert (info.task, info.metric) == (task, metric)
        assert info.stand_in_for is None
        assert info.higher_is_better == (metric == "accuracy")
