"""Datasets from the user's own files (workers.data.user_files): real npz, parquet and saved Hugging Face
files in a temporary directory, checked (each bad file refused with a message naming it, the key or
column and the fix) and built into bundles like the built-in datasets of the same task."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from datasets import ClassLabel, Dataset, DatasetDict, Features, Image, List, Value

from normlab.registry import REGISTRY
from studies.spec.user_data import UserDataset
from workers.data import IGNORE_INDEX, get_dataset
from workers.data.user_files import (
    UserDataError,
    check_user_dataset,
    load_user_dataset,
    register_user_dataset,
)

ROOT = Path(__file__).resolve().parents[3]
RNG = np.random.default_rng(0)


def _images(n: int, side: int = 8, channels: int | None = None) -> np.ndarray:
    shape = (n, side, side) if channels is None else (n, side, side, channels)
    return RNG.integers(0, 256, size=shape, dtype=np.uint8)


def _labels(n: int, classes: int = 3) -> np.ndarray:
    return np.arange(n) % classes


def _npz(path: Path, **arrays: Any) -> str:
    np.savez(path, **arrays)
    return str(path)


def _declare(path: str, task: str, **fields: Any) -> dict[str, Any]:
    return {"name": "mine", "path": path, "task": task, **fields}


def _refused(declaration: dict[str, Any]) -> str:
    with pytest.raises(UserDataError) as caught:
        check_user_dataset(declaration)
    return str(caught.value)


def _table(path: Path, columns: dict[str, Any]) -> str:
    pq.write_table(pa.table(columns), path)
    return str(path)


def _sentences(n: int) -> tuple[list[list[str]], list[list[str]]]:
    words = ["the", "cat", "sat", "on", "a", "mat", "The", "Dog", "ran", "."]
    tags = {"the": "DT", "a": "DT", "The": "DT", "cat": "NN", "mat": "NN", "Dog": "NNP", ".": "."}
    sentences = [[words[(i + j) % len(words)] for j in range(3 + i % 4)] for i in range(n)]
    return sentences, [[tags.get(w, "VBD") for w in s] for s in sentences]


# --- good files, built ------------------------------------------------------------------------------------
def test_npz_images_carved_by_the_split_seed_build_like_a_built_in_image_dataset(tmp_path):
    path = _npz(tmp_path / "scans.npz", x=_images(50, channels=3), y=_labels(50))
    declaration = _declare(path, "image_classification")
    facts = check_user_dataset(declaration)
    assert facts == {
        "task": "image_classification",
        "examples": {"train": 40, "val": 5, "test": 5},
        "classes": 3,
        "image_side": 8,
        "channels": 3,
    }
    bundle = load_user_dataset(declaration, split_seed=1)
    assert bundle.sizes() == facts["examples"]
    assert bundle.train.tensors[0].shape == (40, 3, 8, 8) and bundle.train.tensors[0].dtype == torch.float32
    assert bundle.train.tensors[1].dtype == torch.int64
    assert bundle.model_fields == UserDataset.model_validate(declaration).record(facts).task_fields
    assert (bundle.task, bundle.metric, bundle.higher_is_better, bundle.default_model) == (
        "image_classification",
        "accuracy",
        True,
        "vit_lite_tiny",
    )
    assert bundle.source == f"user_files:{path}" and bundle.pools == {
        "train": "all",
        "val": "all",
        "test": "all",
    }
    # Standardised per channel on the training split, as the built-in image datasets are.
    means = bundle.train.tensors[0].mean(dim=(0, 2, 3))
    assert torch.allclose(means, torch.zeros(3), atol=1e-4)
    assert len(bundle.pixel_mean or ()) == 3
    other = load_user_dataset(declaration, split_seed=2)
    assert not np.array_equal(bundle.split_indices["val"], other.split_indices["val"])
    fixed = {**declaration, "seed": 7}
    assert np.array_equal(
        load_user_dataset(fixed, split_seed=1).split_indices["val"],
        load_user_dataset(fixed, split_seed=2).split_indices["val"],
    )


def test_float_pixels_in_unit_range_are_scaled_like_bytes(tmp_path):
    pixels = _images(30)
    as_bytes = _npz(tmp_path / "bytes.npz", x=pixels, y=_labels(30, 2))
    as_unit = _npz(tmp_path / "unit.npz", x=pixels.astype(np.float32) / 255, y=_labels(30, 2))
    one = load_user_dataset(_declare(as_bytes, "image_classification"), split_seed=0)
    two = load_user_dataset(_declare(as_unit, "image_classification"), split_seed=0)
    assert torch.allclose(one.train.tensors[0], two.train.tensors[0], atol=1e-4)
    assert one.model_fields == {"image_size": 8, "in_channels": 1, "num_classes": 2}


def test_npz_with_its_own_splits(tmp_path):
    path = _npz(
        tmp_path / "own.npz",
        x_train=_images(30),
        y_train=_labels(30),
        x_test=_images(12),
        y_test=_labels(12),
    )
    declaration = _declare(path, "image_classification", splits="from_file", val_fraction=0.2)
    facts = check_user_dataset(declaration)
    assert facts["examples"] == {"train": 24, "val": 6, "test": 12}
    bundle = load_user_dataset(declaration, split_seed=0)
    assert bundle.sizes() == facts["examples"]
    assert bundle.pools == {"train": "train", "val": "train", "test": "test"}


def test_parquet_table_with_a_split_column_builds_like_a_built_in_tabular_dataset(tmp_path):
    n = 60
    x = RNG.normal(size=(n, 3)) * [1.0, 10.0, 100.0] + [0.0, 5.0, -50.0]
    split = np.array(["train"] * 40 + ["validation"] * 8 + ["test"] * 12)
    path = _table(
        tmp_path / "sales.parquet",
        {"age": x[:, 0], "rooms": x[:, 1], "area": x[:, 2], "split": split, "price": x @ [1.0, 2.0, 3.0]},
    )
    declaration = _declare(path, "tabular_regression", y="price", splits="from_file")
    facts = check_user_dataset(declaration)
    assert facts == {
        "task": "regression",
        "examples": {"train": 40, "val": 8, "test": 12},
        "classes": None,
        "features": 3,
    }
    bundle = load_user_dataset(declaration, split_seed=0)
    assert bundle.sizes() == facts["examples"]
    assert bundle.model_fields == {"num_features": 3, "num_outputs": 1}
    assert bundle.model_fields == UserDataset.model_validate(declaration).record(facts).task_fields
    assert (bundle.task, bundle.metric, bundle.higher_is_better, bundle.default_model) == (
        "regression",
        "rmse",
        False,
        "tabular_tiny",
    )
    features, target = bundle.train.tensors
    assert features.shape == (40, 3) and target.shape == (40, 1)
    assert torch.allclose(features.mean(dim=0), torch.zeros(3), atol=1e-5)  # standardised on train
    assert torch.allclose(features.std(dim=0, unbiased=False), torch.ones(3), atol=1e-4)
    assert bundle.target_std == pytest.approx(float(np.std(x[:40] @ [1.0, 2.0, 3.0])))
    only_two = load_user_dataset({**declaration, "features": ["age", "area"]}, split_seed=0)
    assert only_two.model_fields["num_features"] == 2


def test_a_saved_hugging_face_image_dataset_with_its_own_splits(tmp_path):
    features = Features({"image": Image(), "label": ClassLabel(names=["a", "b", "c"])})

    def part(n: int) -> Dataset:
        return Dataset.from_dict(
            {"image": list(_images(n, side=6)), "label": _labels(n).tolist()}, features=features
        )

    path = tmp_path / "hf_images"
    DatasetDict({"train": part(20), "validation": part(6), "test": part(9)}).save_to_disk(str(path))
    declaration = _declare(str(path), "image_classification", format="hf_disk", splits="from_file")
    facts = check_user_dataset(declaration)
    assert facts == {
        "task": "image_classification",
        "examples": {"train": 20, "val": 6, "test": 9},
        "classes": 3,
        "image_side": 6,
        "channels": 1,
    }
    bundle = load_user_dataset(declaration, split_seed=0)
    assert bundle.train.tensors[0].shape == (20, 1, 6, 6)
    assert bundle.class_names == ("a", "b", "c")
    assert bundle.model_fields == UserDataset.model_validate(declaration).record(facts).task_fields


def test_a_saved_hugging_face_token_dataset_pads_like_ptb_pos(tmp_path):
    sentences, tags = _sentences(40)
    names = sorted({t for line in tags for t in line})
    features = Features({"tokens": List(Value("string")), "tags": List(ClassLabel(names=names))})
    ids = [[names.index(t) for t in line] for line in tags]
    path = tmp_path / "hf_tokens"
    Dataset.from_dict({"tokens": sentences, "tags": ids}, features=features).save_to_disk(str(path))
    declaration = _declare(str(path), "token_classification", format="hf_disk", max_len=8)
    facts = check_user_dataset(declaration)
    assert facts["examples"] == {"train": 32, "val": 4, "test": 4}
    assert (facts["tags"], facts["max_len"], facts["longest_sentence"]) == (len(names), 8, 6)
    bundle = load_user_dataset(declaration, split_seed=0)
    x, y = bundle.train.tensors
    assert x.shape == (32, 8) and y.shape == (32, 8)
    assert bundle.class_names == tuple(names)
    assert (y == IGNORE_INDEX).any() and ((x == 0) == (y == IGNORE_INDEX)).all()  # pads are ignored
    fields = UserDataset.model_validate(declaration).record(facts).task_fields
    assert {k: v for k, v in fields.items() if k != "vocab_size"} == {
        k: v for k, v in bundle.model_fields.items() if k != "vocab_size"
    }
    assert bundle.model_fields["vocab_size"] <= fields["vocab_size"]  # carved: the file's words bound it


def test_token_files_with_their_own_splits_state_the_exact_vocabulary(tmp_path):
    sentences, tags = _sentences(30)
    joined = {
        "x": np.array([" ".join(s) for s in sentences]),
        "y": np.array([" ".join(t) for t in tags]),
    }
    path = _npz(
        tmp_path / "tags.npz",
        **{
            f"{k}_{split}": v[rows]
            for k, v in joined.items()
            for split, rows in (("train", slice(0, 20)), ("val", slice(20, 25)), ("test", slice(25, 30)))
        },
    )
    declaration = _declare(path, "token_classification", splits="from_file")
    facts = check_user_dataset(declaration)
    assert facts["vocabulary_exact"] is True
    bundle = load_user_dataset(declaration, split_seed=0)
    assert bundle.model_fields == UserDataset.model_validate(declaration).record(facts).task_fields
    parquet = _table(tmp_path / "tags.parquet", {"tokens": sentences, "tags": tags})
    from_table = load_user_dataset(_declare(parquet, "token_classification"), split_seed=0)
    assert from_table.model_fields["num_classes"] == bundle.model_fields["num_classes"]


def test_a_registered_user_dataset_is_built_by_name(tmp_path):
    path = _npz(tmp_path / "scans.npz", x=_images(40), y=_labels(40))
    declaration = _declare(path, "image_classification", name="my_scans")
    record = register_user_dataset(declaration)
    try:
        assert REGISTRY.datasets.get("my_scans") is record and record.build is not None
        assert record.source == f"user_files:{path}" and record.task_fields["num_classes"] == 3
        assert register_user_dataset(declaration) is record  # again: a no-op
        bundle = get_dataset("my_scans", split_seed=0)
        assert get_dataset("my_scans", split_seed=0) is bundle  # memoised
        assert bundle.sizes() == {"train": 32, "val": 4, "test": 4} and bundle.name == "my_scans"
        with pytest.raises(ValueError, match="has no corruption eval sets"):
            get_dataset("my_scans", severity=3)
    finally:
        REGISTRY.datasets.remove_source(record.source)
    with pytest.raises(KeyError, match="unknown dataset 'my_scans'"):
        get_dataset("my_scans")


def test_the_check_imports_no_torch(tmp_path):
    """The check opens every format without torch, given a package that does not import the registry
    (workers/data/__init__.py does today, so the package is stood in for here)."""
    npz = _npz(tmp_path / "a.npz", x=_images(20), y=_labels(20))
    table = _table(tmp_path / "t.parquet", {"f": np.arange(20.0), "target": np.arange(20.0)})
    hf = tmp_path / "hf"
    Dataset.from_dict({"f": list(range(20)), "target": [float(i) for i in range(20)]}).save_to_disk(str(hf))
    code = f"""
import sys, types
package = types.ModuleType("workers.data")
package.__path__ = [{str(ROOT / "workers" / "data")!r}]
sys.modules["workers.data"] = package
from workers.data.user_files import check_user_dataset
check_user_dataset({{"name": "a", "path": {npz!r}, "task": "image_classification"}})
check_user_dataset({{"name": "b", "path": {table!r}, "task": "tabular_regression"}})
check_user_dataset({{"name": "c", "path": {str(hf)!r}, "format": "hf_disk", "task": "tabular_regression"}})
assert "torch" not in sys.modules, "torch was imported"
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env)


# --- bad files, refused ------------------------------------------------------------------------------------
def test_a_missing_or_unreadable_file(tmp_path):
    missing = str(tmp_path / "nothing.npz")
    assert _refused(_declare(missing, "image_classification")) == (
        f"{missing}: no such file on this node; copy the data to the cluster's shared volume at that path, "
        "or fix path"
    )
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip archive")
    assert _refused(_declare(str(garbage), "image_classification")).startswith(
        f"{garbage} cannot be read as npz"
    )
    bad_table = tmp_path / "garbage.parquet"
    bad_table.write_bytes(b"PAR1 nonsense")
    message = _refused(_declare(str(bad_table), "tabular_regression"))
    assert message.startswith(f"{bad_table} cannot be read as parquet") and "write it with" in message
    not_saved = tmp_path / "empty_dir"
    not_saved.mkdir()
    message = _refused(_declare(str(not_saved), "image_classification", format="hf_disk"))
    assert message.startswith(f"{not_saved} cannot be read as a Hugging Face dataset saved with save_to_disk")
    assert "is a directory" in _refused(_declare(str(not_saved), "image_classification", format="npz"))
    npy = tmp_path / "one.npy"
    np.save(npy, _images(3))
    assert "holds one array (a .npy file)" in _refused(
        _declare(str(npy), "image_classification", format="npz")
    )


def test_a_missing_key_or_column_names_what_the_file_has(tmp_path):
    path = _npz(tmp_path / "a.npz", images=_images(20), y=_labels(20))
    assert _refused(_declare(path, "image_classification")) == (
        f"{path} has no key 'x' (it has 'images', 'y'): set x to the key that holds it"
    )
    table = _table(tmp_path / "t.parquet", {"f": np.arange(20.0), "price": np.arange(20.0)})
    assert _refused(_declare(table, "tabular_regression")) == (
        f"{table} has no column 'target' (it has 'f', 'price'): set y to the column that holds it"
    )
    assert "has no column 'g'" in _refused(
        _declare(table, "tabular_regression", y="price", features=["f", "g"])
    )
    split_keys = _npz(tmp_path / "s.npz", x_train=_images(20), y_train=_labels(20))
    assert "has its own splits (x_train, y_train): set splits: from_file" in _refused(
        _declare(split_keys, "image_classification")
    )


def test_inputs_and_labels_of_different_lengths(tmp_path):
    path = _npz(tmp_path / "a.npz", x=_images(20), y=_labels(19))
    assert _refused(_declare(path, "image_classification")) == (
        f"key 'x' of {path} has 20 examples but key 'y' of {path} has 19: the inputs and labels must be "
        "aligned, one label per example"
    )


def test_class_labels_that_are_not_integers_from_zero(tmp_path):
    fractional = _npz(tmp_path / "f.npz", x=_images(20), y=_labels(20) + 0.5)
    assert _refused(_declare(fractional, "image_classification")) == (
        f"key 'y' of {fractional} holds non-integer class labels in 20 rows (first: row 0): labels must be "
        "integers 0..K-1"
    )
    negative = _npz(tmp_path / "n.npz", x=_images(20), y=_labels(20) - 1)
    assert _refused(_declare(negative, "image_classification")) == (
        f"key 'y' of {negative} holds negative class labels in 7 rows (first: row 0): labels must be "
        "integers 0..K-1"
    )
    names = _npz(tmp_path / "s.npz", x=_images(20), y=np.array(["cat", "dog"] * 10))
    assert "class labels must be integers 0..K-1 (map names to class ids)" in _refused(
        _declare(names, "image_classification")
    )
    one_class = _npz(tmp_path / "o.npz", x=_images(20), y=np.zeros(20, dtype=int))
    assert "classification needs at least 2" in _refused(_declare(one_class, "image_classification"))


def test_non_finite_features_and_targets(tmp_path):
    f = np.arange(30.0)
    with_nan = _table(tmp_path / "nan.parquet", {"a": f, "b": np.where(f == 4, np.nan, f), "target": f})
    assert _refused(_declare(with_nan, "tabular_regression")) == (
        f"the feature columns (a, b) of {with_nan}: NaN or infinite values in 1 row (first: row 4), first "
        "in column 'b'; drop or impute those rows"
    )
    with_null = _table(tmp_path / "null.parquet", {"a": pa.array([1, None] * 15), "target": f})
    assert "NaN or infinite values in 15 rows (first: row 1), first in column 'a'" in _refused(
        _declare(with_null, "tabular_regression")
    )
    infinite = _npz(tmp_path / "inf.npz", x=np.ones((30, 2)), y=np.where(f == 9, np.inf, f))
    assert _refused(_declare(infinite, "tabular_regression")) == (
        f"key 'y' of {infinite} holds NaN or infinite targets in 1 row (first: row 9): drop or fix those rows"
    )
    text = _table(tmp_path / "text.parquet", {"city": ["x"] * 30, "target": f})
    assert "column 'city' of" in _refused(_declare(text, "tabular_regression"))
    nan_pixels = _npz(tmp_path / "px.npz", x=np.full((20, 4, 4), np.nan), y=_labels(20))
    assert "holds NaN or infinite pixels in 20 rows" in _refused(_declare(nan_pixels, "image_classification"))


def test_images_of_the_wrong_rank_or_shape(tmp_path):
    flat = _npz(tmp_path / "flat.npz", x=np.zeros((20, 64), dtype=np.uint8), y=_labels(20))
    assert _refused(_declare(flat, "image_classification")) == (
        f"key 'x' of {flat} has shape (20, 64) (rank 2); images are (N, H, W) grey or (N, H, W, C) with C "
        "channels: reshape the array"
    )
    wide = _npz(tmp_path / "wide.npz", x=np.zeros((20, 4, 6), dtype=np.uint8), y=_labels(20))
    assert "holds 4x6 images; the models read square images" in _refused(
        _declare(wide, "image_classification")
    )
    standardised = _npz(tmp_path / "std.npz", x=RNG.normal(size=(20, 4, 4)), y=_labels(20))
    assert "give uint8 0..255 or floats in [0, 1]" in _refused(_declare(standardised, "image_classification"))
    channels_first = _npz(
        tmp_path / "chw.npz", x=_images(20, channels=3).transpose(0, 3, 1, 2), y=_labels(20)
    )
    assert check_user_dataset(_declare(channels_first, "image_classification"))["channels"] == 3


def test_too_few_examples_for_the_fractions(tmp_path):
    path = _npz(tmp_path / "few.npz", x=_images(4), y=_labels(4, 2))
    assert _refused(_declare(path, "image_classification", val_fraction=0.4, test_fraction=0.4)) == (
        f"{path}: 4 training examples are too few for val_fraction and test_fraction (val 0.4, test 0.4: "
        "4 examples carved, none left to train on); supply more examples or lower the fractions"
    )


def test_a_test_split_missing_where_the_file_should_have_its_own(tmp_path):
    path = _npz(tmp_path / "a.npz", x_train=_images(20), y_train=_labels(20))
    assert _refused(_declare(path, "image_classification", splits="from_file")) == (
        f"{path} has no test split (keys x_test and y_test; it has x_train, y_train): splits: from_file reads "
        "the file's own train and test splits; add them, or set splits: carve to carve a test set from the file"
    )
    f = np.arange(20.0)
    table = _table(tmp_path / "t.parquet", {"a": f, "target": f, "split": ["train"] * 15 + ["val"] * 5})
    assert _refused(_declare(table, "tabular_regression", splits="from_file")) == (
        f"column 'split' of {table} names no test rows: splits: from_file reads the file's own train and "
        "test splits; mark the test rows, or set splits: carve"
    )
    odd = _table(tmp_path / "o.parquet", {"a": f, "target": f, "split": ["train"] * 15 + ["holdout"] * 5})
    assert "holds split names ['holdout']; use train, val (or validation) and test" in _refused(
        _declare(odd, "tabular_regression", splits="from_file")
    )
    hf = tmp_path / "hf"
    DatasetDict({"train": Dataset.from_dict({"a": list(f), "target": list(f)})}).save_to_disk(str(hf))
    assert _refused(_declare(str(hf), "tabular_regression", format="hf_disk", splits="from_file")) == (
        f"{hf} has no test split (it has train): splits: from_file reads the dataset's own train and test "
        "splits; save a DatasetDict with both, or set splits: carve"
    )
    # Carving from a DatasetDict of one split is fine.
    assert check_user_dataset(_declare(str(hf), "tabular_regression", format="hf_disk"))["features"] == 1


def test_token_files_with_misaligned_tags(tmp_path):
    path = _npz(tmp_path / "t.npz", x=np.array(["the cat sat"] * 20), y=np.array(["DT NN"] * 20))
    assert _refused(_declare(path, "token_classification")) == (
        f"key 'x' of {path}, row 0 has 3 tokens but key 'y' of {path} has 2 tags: give one tag per token"
    )


@pytest.fixture(autouse=True)
def _no_leftover_records() -> Iterator[None]:
    before = REGISTRY.datasets.names()
    yield
    assert REGISTRY.datasets.names() == before


def test_splits_with_different_columns(tmp_path):
    f = [float(i) for i in range(20)]
    hf = tmp_path / "hf"
    DatasetDict(
        {
            "train": Dataset.from_dict({"a": f, "target": f}),
            "test": Dataset.from_dict({"b": f, "target": f}),
        }
    ).save_to_disk(str(hf))
    assert _refused(_declare(str(hf), "tabular_regression", format="hf_disk", splits="from_file")) == (
        f"the columns of {hf}, split 'test' (b, target) differ from those of {hf}, split 'train' (a, target): "
        "give every split the same columns"
    )
