"""Each dataset with an offline source loads from it with the right shapes, labels and fixed splits.

Needs `make data-offline` (the `offline_sources` fixture fails loudly when it has not run).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from workers.data import DATASETS, IGNORE_INDEX, DatasetBundle, get_dataset

pytestmark = [pytest.mark.offline_data, pytest.mark.usefixtures("offline_sources", "empty_cache")]


@dataclass(frozen=True)
class Expected:
    sizes: tuple[int, int, int]  # train, val, test
    x_shape: tuple[int, ...]  # one example
    num_classes: int | None  # None: regression / language model
    stand_in_for: str | None


EXPECTED: dict[str, Expected] = {
    "digits": Expected((1437, 180, 180), (1, 8, 8), 10, "mnist"),
    "mnist_5k": Expected((4000, 500, 500), (1, 28, 28), 10, "mnist"),
    "fashion_mnist": Expected((54000, 6000, 10000), (1, 28, 28), 10, None),
    "ptb_pos_sample": Expected((801, 100, 100), (128,), 44, "ptb_wsj_pos"),
    "rotten_tomatoes_vader": Expected((8454, 1057, 1057), (64,), 2, "sst2"),
    "california_housing": Expected((16512, 2064, 2064), (8,), None, None),
}


def _labels(bundle: DatasetBundle, split: str) -> torch.Tensor:
    return getattr(bundle, split).tensors[1]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_offline_dataset_has_expected_split_sizes_shapes_and_labels(name: str) -> None:
    expected = EXPECTED[name]
    bundle = get_dataset(name, download=False)

    assert bundle.source.startswith("offline:")
    assert (len(bundle.train), len(bundle.val), len(bundle.test)) == expected.sizes
    assert bundle.stand_in_for == expected.stand_in_for == DATASETS[name].stand_in_for
    for split in ("train", "val", "test"):
        x, y = getattr(bundle, split).tensors
        assert tuple(x.shape[1:]) == expected.x_shape
        assert len(x) == len(y)
        if expected.num_classes is not None:
            valid = y[y != IGNORE_INDEX]
            assert valid.dtype == torch.int64
            assert int(valid.min()) >= 0
            assert int(valid.max()) < expected.num_classes
    if expected.num_classes is not None:
        assert bundle.model_fields["num_classes"] == expected.num_classes
        # every class shows up in training
        train_classes = torch.unique(_labels(bundle, "train")[_labels(bundle, "train") != IGNORE_INDEX])
        assert len(train_classes) >= min(expected.num_classes, 40)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_splits_do_not_overlap_and_are_fixed_by_split_seed_only(name: str) -> None:
    bundle = get_dataset(name, split_seed=0, download=False)
    by_pool: dict[str, list[np.ndarray]] = {}
    for split in ("train", "val", "test"):
        by_pool.setdefault(bundle.pools[split], []).append(bundle.split_indices[split])
    for indices in by_pool.values():
        joined = np.concatenate(indices)
        assert len(np.unique(joined)) == len(joined), "an example is in two splits"

    from workers.data import clear_memory_cache

    clear_memory_cache()
    again = get_dataset(name, split_seed=0, download=False)
    other = get_dataset(name, split_seed=1, download=False)
    assert again is not bundle  # rebuilt from disk, yet identical
    assert torch.equal(again.val.tensors[0], bundle.val.tensors[0])
    np.testing.assert_array_equal(again.split_indices["val"], bundle.split_indices["val"])
    assert not np.array_equal(other.split_indices["val"], bundle.split_indices["val"])
    assert not torch.equal(other.train.tensors[0][:50], bundle.train.tensors[0][:50])


def test_fashion_mnist_keeps_the_official_test_set_and_carves_validation_from_train() -> None:
    bundle = get_dataset("fashion_mnist", download=False)
    assert bundle.pools == {"train": "train", "val": "train", "test": "test"}
    np.testing.assert_array_equal(bundle.split_indices["test"], np.arange(10000))
    assert torch.bincount(bundle.test.tensors[1]).tolist() == [1000] * 10


@pytest.mark.parametrize("name", ["digits", "mnist_5k"])
def test_images_are_normalised_with_training_statistics(name: str) -> None:
    bundle = get_dataset(name, download=False)
    train = bundle.train.tensors[0].double()
    assert abs(float(train.mean())) < 1e-4
    assert abs(float(train.std()) - 1.0) < 1e-3
    assert bundle.default_model == "vit_lite_tiny"
    assert bundle.model_fields == {"image_size": train.shape[-1], "in_channels": 1, "num_classes": 10}


def test_california_housing_is_standardised_on_train_and_keeps_the_target_scale() -> None:
    bundle = get_dataset("california_housing", download=False)
    x, y = bundle.train.tensors
    assert x.dtype == y.dtype == torch.float32
    assert y.shape == (16512, 1)
    assert torch.allclose(x.double().mean(0), torch.zeros(8, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(x.double().std(0, unbiased=False), torch.ones(8, dtype=torch.float64), atol=1e-4)
    assert abs(float(y.double().std(unbiased=False)) - 1.0) < 1e-4
    # Median house value in units of $100k has a spread of about 1.15 over the whole set.
    assert 1.0 < bundle.target_std < 1.3
    assert bundle.metric == "rmse" and bundle.higher_is_better is False
    assert bundle.model_fields == {"num_features": 8, "num_outputs": 1}
    assert bundle.default_model == "tabular_paper"


def test_pos_sample_pads_words_with_zero_and_labels_pads_with_ignore_index() -> None:
    bundle = get_dataset("ptb_pos_sample", download=False)
    x, y = bundle.train.tensors
    assert bundle.vocab is not None and bundle.vocab[:2] == ("<pad>", "<unk>")
    assert torch.equal(x == 0, y == IGNORE_INDEX)
    assert bundle.class_names is not None and {"NN", "NNP", "VBD", "DT"} <= set(bundle.class_names)
    assert bundle.model_fields["head"] == "token" and bundle.model_fields["pad_id"] == 0
    # The vocabulary comes from training sentences only, so held-out sentences contain unknown words.
    assert int((bundle.val.tensors[0] == 1).sum()) > 0
    assert int((x == 1).sum()) == 0


def test_lm_sample_targets_are_inputs_shifted_by_one() -> None:
    bundle = get_dataset("ptb_lm_sample", download=False)
    assert bundle.stand_in_for == "ptb_lm"
    assert bundle.metric == "perplexity" and not bundle.higher_is_better
    for split in ("train", "val", "test"):
        x, y = getattr(bundle, split).tensors
        assert x.shape[1] == bundle.model_fields["max_len"] == 64
        flat_x, flat_y = x.reshape(-1), y.reshape(-1)
        valid = flat_y != IGNORE_INDEX
        n = int(valid.sum())
        assert bool(valid[:n].all()), "only the tail of the last block is padding"
        assert torch.equal(flat_x[1:n], flat_y[: n - 1])
    assert len(bundle.train) > 5 * len(bundle.val)


def test_rotten_tomatoes_stand_in_is_binary_and_roughly_balanced() -> None:
    bundle = get_dataset("rotten_tomatoes_vader", download=False)
    labels = torch.cat([bundle.train.tensors[1], bundle.val.tensors[1], bundle.test.tensors[1]])
    assert len(labels) == 10568  # 10,605 sentences minus 37 rated exactly neutral
    assert 0.45 < float(labels.float().mean()) < 0.55
    assert bundle.model_fields["head"] == "sequence"


@pytest.mark.parametrize("name", ["digits_c", "fashion_mnist_c"])
def test_corruption_stand_ins_add_corrupted_copies_of_the_test_split(name: str) -> None:
    bundle = get_dataset(name, download=False)
    clean_x, clean_y = bundle.test.tensors
    assert bundle.stand_in_for == "cifar10_c_hendrycks"
    assert list(bundle.eval_sets) == ["gaussian_noise", "motion_blur", "brightness"]
    for corrupted in bundle.eval_sets.values():
        x, y = corrupted.tensors
        assert x.shape == clean_x.shape and x.dtype == torch.float32
        assert torch.equal(y, clean_y)
        assert float((x - clean_x).abs().mean()) > 0.01


def test_corruption_options_choose_the_eval_sets() -> None:
    bundle = get_dataset("digits_c", download=False, corruptions=["contrast", "impulse_noise"], severity=5)
    assert list(bundle.eval_sets) == ["contrast", "impulse_noise"]
    with pytest.raises(ValueError, match="unknown corruptions"):
        get_dataset("digits_c", download=False, corruptions=["snow"])  # only in the published CIFAR-10-C
    with pytest.raises(ValueError, match="no corruption eval sets"):
        get_dataset("digits", download=False, corruptions=["contrast"])
    with pytest.raises(ValueError, match="no corruption eval sets"):
        get_dataset("digits", download=False, severities=[2])


def test_several_severities_name_each_eval_set_by_corruption_and_severity() -> None:
    bundle = get_dataset(
        "digits_c", download=False, corruptions=["gaussian_noise", "contrast"], severities=[1, 5]
    )
    assert list(bundle.eval_sets) == [
        "gaussian_noise_s1",
        "gaussian_noise_s5",
        "contrast_s1",
        "contrast_s5",
    ]
    clean = bundle.test.tensors[0]
    for name in ("gaussian_noise", "contrast"):
        mild, harsh = (
            float((bundle.eval_sets[f"{name}_s{s}"].tensors[0] - clean).abs().mean()) for s in (1, 5)
        )
        assert 0 < mild < harsh
    one = get_dataset("digits_c", download=False, corruptions=["contrast"], severities=[5])
    assert torch.equal(one.eval_sets["contrast"].tensors[0], bundle.eval_sets["contrast_s5"].tensors[0])


@pytest.mark.parametrize(
    "options, message",
    [
        ({"severities": [0]}, "severities must be distinct values in 1..5"),
        ({"severities": [3, 3]}, "severities must be distinct"),
        ({"severities": [2], "severity": 2}, "not both"),
        ({"corruptions": []}, "non-empty list"),
        ({"corruptions": ["contrast", "contrast"]}, "without repeats"),
    ],
)
def test_bad_corruption_options_are_rejected(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_dataset("digits_c", download=False, **options)


def test_images_carry_their_pixel_statistics_and_mirror_symmetry() -> None:
    digits = get_dataset("digits", download=False)
    unit = digits.train.tensors[0] * torch.tensor(digits.pixel_std).view(1, -1, 1, 1) + torch.tensor(
        digits.pixel_mean
    ).view(1, -1, 1, 1)
    assert float(unit.min()) >= -1e-6 and float(unit.max()) <= 1 + 1e-6  # standardisation undone
    assert not digits.mirror_symmetric
    assert get_dataset("fashion_mnist", download=False).mirror_symmetric
    text = get_dataset("ptb_pos_sample", download=False)
    assert text.pixel_mean is None and not text.mirror_symmetric


def test_repeated_calls_return_the_memoised_bundle() -> None:
    first = get_dataset("digits", split_seed=3, download=False)
    assert get_dataset("digits", split_seed=3, download=False) is first
    assert get_dataset("digits", split_seed=4, download=False) is not first


def test_digits_are_the_rows_sklearn_load_digits_returns_read_without_importing_sklearn() -> None:
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    from workers.data.sources.images import load_digits_sklearn

    arrays = load_digits_sklearn()
    assert arrays is not None
    reference = load_digits()
    np.testing.assert_array_equal(
        arrays["train_x"][..., 0], np.rint(reference.images * (255.0 / 16.0)).astype(np.uint8)
    )
    np.testing.assert_array_equal(arrays["train_y"], reference.target)
    probe = "import sys; from workers.data.sources.images import load_digits_sklearn as f; f(); print('sklearn' in sys.modules)"
    assert (
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )
