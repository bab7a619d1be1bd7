"""A dataset from the user's own files on the cluster's shared volume, declared in a spec.

    user_datasets:
      - name: my_scans
        path: /mnt/shared/scans.npz        # x: (N, H, W[, C]) images, y: (N,) class ids
        task: image_classification
      - name: my_sales
        path: /mnt/shared/sales.parquet
        task: tabular_regression
        y: revenue                         # every other column is a feature
        splits: from_file                  # rows say their split in the column `split`

The declaration is checked here without reading a byte (the API may not see the volume); the workers open
the files and check what is in them (workers.data.user_files.check_user_dataset), and `record(facts)`
turns the declaration and those facts into the dataset's normlab.records.Dataset record, which the rest of
the spec validates against like any registered dataset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from normlab.records import Dataset
from normlab.registry import REGISTRY
from studies.datasets import METRIC_HIGHER_IS_BETTER
from studies.spec.distributions import _Strict, raise_field_problems
from studies.spec.integers import Integer

__all__ = [
    "DEFAULT_COLUMNS",
    "USER_DATA_FORMATS",
    "USER_DATA_TASKS",
    "UserDataFormat",
    "UserDataTask",
    "UserDataset",
]

UserDataFormat = Literal["npz", "parquet", "hf_disk"]
UserDataTask = Literal["image_classification", "tabular_regression", "token_classification"]
USER_DATA_FORMATS: tuple[str, ...] = ("npz", "parquet", "hf_disk")
USER_DATA_TASKS: tuple[str, ...] = ("image_classification", "tabular_regression", "token_classification")

# What each task is, in the registry's words: the built bundle's task, its data family, the one metric
# that fits it, and the model a study trains on it when its spec names none (studies.spec.names.KNOWN_MODELS).
_BUNDLE_TASK = {
    "image_classification": "image_classification",
    "tabular_regression": "regression",
    "token_classification": "token_classification",
}
_FAMILY = {"image_classification": "image", "tabular_regression": "tabular", "token_classification": "text"}
_METRIC = {
    "image_classification": "accuracy",
    "tabular_regression": "rmse",
    "token_classification": "accuracy",
}
_DEFAULT_MODEL = {"image": "vit_lite_tiny", "tabular": "tabular_tiny", "text": "encoder_tiny"}
# Which formats hold each task's data: images are arrays (npz) or a Hugging Face Image column.
_FORMATS = {
    "image_classification": ("npz", "hf_disk"),
    "tabular_regression": ("npz", "parquet", "hf_disk"),
    "token_classification": ("npz", "parquet", "hf_disk"),
}
# (format, task) -> the default key or column of the inputs (x) and of the labels or target (y). Tabular
# tables (parquet, hf_disk) have no x: their features are columns (`features`, default every other one).
DEFAULT_COLUMNS: dict[tuple[str, str], tuple[str | None, str]] = {
    ("npz", "image_classification"): ("x", "y"),
    ("npz", "tabular_regression"): ("x", "y"),
    ("npz", "token_classification"): ("x", "y"),
    ("parquet", "tabular_regression"): (None, "target"),
    ("parquet", "token_classification"): ("tokens", "tags"),
    ("hf_disk", "image_classification"): ("image", "label"),
    ("hf_disk", "tabular_regression"): (None, "target"),
    ("hf_disk", "token_classification"): ("tokens", "tags"),
}
_SUFFIX_FORMAT = {".npz": "npz", ".parquet": "parquet", ".pq": "parquet"}
DEFAULT_SPLIT_COLUMN = "split"
DEFAULT_VAL_FRACTION = 0.1
DEFAULT_TEST_FRACTION = 0.1
DEFAULT_MAX_LEN = 128  # token sequences are padded or truncated to this, as ptb_pos's are
PAD_ID = 0  # workers.data.vocab.PAD_ID: padding is id 0 of every vocabulary
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class UserDataset(_Strict):
    """A dataset read from files on the cluster's shared volume.

    Formats: `npz` (numpy.savez arrays), `parquet` (one table), `hf_disk` (a Hugging Face Dataset or
    DatasetDict saved with save_to_disk). Keys and columns (`x` the inputs, `y` the labels or target)
    default by format and task (DEFAULT_COLUMNS); tabular tables read the `features` columns, by default
    every column but `y` (and the split column).

    Splits: `carve` (default) carves validation and test sets from the whole file by `seed`
    (`val_fraction`, `test_fraction`, 0.1 each); `from_file` uses the file's own: npz keys `<x>_train`,
    `<y>_train`, `<x>_test`, `<y>_test` (and `<x>_val`, `<y>_val`), a parquet column `split_column`
    (`split`) with values train, val (or validation) and test, or a saved DatasetDict's splits. A file
    without a validation split has one carved from its training split by `val_fraction`.
    `seed` None: the study's split_seed carves them, as it does a built-in dataset's."""

    name: str = Field(min_length=1, max_length=64)
    path: str = Field(min_length=1, max_length=1000)
    # None: from the path's suffix (.npz, .parquet or .pq); a directory saved by save_to_disk says hf_disk.
    format: UserDataFormat | None = Field(None, validate_default=True)
    task: UserDataTask
    x: str | None = Field(None, min_length=1, max_length=200)
    y: str | None = Field(None, min_length=1, max_length=200)
    features: list[str] | None = Field(None, min_length=1)
    splits: Literal["carve", "from_file"] = "carve"
    split_column: str | None = Field(None, min_length=1, max_length=200)
    val_fraction: float = Field(DEFAULT_VAL_FRACTION, gt=0, lt=1)
    test_fraction: float | None = Field(None, gt=0, lt=1)  # None: 0.1 when carving, the file's own otherwise
    seed: Integer | None = Field(None, ge=0)
    metric: str | None = None  # None: accuracy for classification, rmse for regression
    max_len: Integer | None = Field(None, ge=1, le=4096)  # token_classification only; None: 128
    description: str = Field("", max_length=2000)
    # What the server's check found in the files (workers.data.user_files.check_user_dataset): filled in
    # at submission, a client's own value replaced; the record's class count, size and task fields.
    facts: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """Fill what the declaration leaves to its format and task, so the stored spec says it."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        path = data.get("path")
        if data.get("format") is None and isinstance(path, str):
            data["format"] = _SUFFIX_FORMAT.get(PurePosixPath(path).suffix.lower())
        fmt, task = data.get("format"), data.get("task")
        if isinstance(task, str) and task in _METRIC and data.get("metric") is None:
            data["metric"] = _METRIC[task]
        if isinstance(fmt, str) and isinstance(task, str) and (fmt, task) in DEFAULT_COLUMNS:
            x, y = DEFAULT_COLUMNS[(fmt, task)]
            if data.get("x") is None and x is not None:
                data["x"] = x
            if data.get("y") is None:
                data["y"] = y
        if fmt == "parquet" and data.get("splits") == "from_file" and data.get("split_column") is None:
            data["split_column"] = DEFAULT_SPLIT_COLUMN
        if task == "token_classification" and data.get("max_len") is None:
            data["max_len"] = DEFAULT_MAX_LEN
        return data

    @field_validator("name")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise PydanticCustomError(
                "dataset_name",
                "name must be lowercase letters, digits and underscores, starting with a letter (it names "
                "the dataset in specs and /results/<dataset>); got '{value}'",
                {"value": name},
            )
        return name

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if "\x00" in path or not PurePosixPath(path).is_absolute():
            raise PydanticCustomError(
                "relative_path",
                "path must be absolute: every node reads the file from the cluster's shared volume, e.g. "
                "/mnt/shared/data/train.npz; got '{value}'",
                {"value": path},
            )
        return path

    @field_validator("format")
    @classmethod
    def _known_format(cls, fmt: str | None) -> str:
        if fmt is None:
            raise PydanticCustomError(
                "format_not_inferred",
                "format is needed: the path's suffix does not say it; set format to npz, parquet or hf_disk "
                "(a directory written by save_to_disk)",
            )
        return fmt

    @field_validator("features")
    @classmethod
    def _unique(cls, features: list[str] | None) -> list[str] | None:
        if features is not None and len(set(features)) != len(features):
            raise ValueError(f"features must name each column once, got {features}")
        return features

    @model_validator(mode="after")
    def _consistent(self) -> UserDataset:
        raise_field_problems(type(self).__name__, self._problems())
        return self

    def _problems(self) -> list[tuple[str, str, str, Any]]:
        problems: list[tuple[str, str, str, Any]] = []
        taken = REGISTRY.datasets.find(self.name)
        if taken is not None and taken.source != self.source:
            problems.append(
                (
                    "name",
                    "dataset_name_taken",
                    f"dataset name {self.name!r} is taken by a registered dataset ({taken.source}); choose "
                    "another name",
                    self.name,
                )
            )
        if self.format not in _FORMATS[self.task]:
            problems.append(
                (
                    "format",
                    "format_task",
                    f"{self.format} does not hold {self.task} data here: store images as npz arrays "
                    "((N, H, W) or (N, H, W, C) at key x) or as a Hugging Face dataset with an Image "
                    "column (hf_disk)",
                    self.format,
                )
            )
        tabular_table = self.task == "tabular_regression" and self.format != "npz"
        if tabular_table and self.x is not None:
            problems.append(
                (
                    "x",
                    "x_in_a_table",
                    f"a {self.format} table's features are its columns: list them in features (or leave "
                    "features out for every column but y), not x",
                    self.x,
                )
            )
        if self.features is not None and not tabular_table:
            where = "npz reads its features as one (N, F) array at key x" if self.format == "npz" else ""
            problems.append(
                (
                    "features",
                    "features_not_columns",
                    "features names the feature columns of a parquet or hf_disk table for "
                    "tabular_regression" + (f"; {where}" if where else f", not {self.task}"),
                    self.features,
                )
            )
        if self.features is not None and self.y in self.features:
            problems.append(
                (
                    "features",
                    "target_is_a_feature",
                    f"features lists the target column {self.y!r}",
                    self.features,
                )
            )
        if self.split_column is not None and not (self.format == "parquet" and self.splits == "from_file"):
            problems.append(
                (
                    "split_column",
                    "split_column_unused",
                    "split_column names the column of a parquet file's own splits (splits: from_file); "
                    + (
                        "npz files name their splits by key (<x>_train, <x>_test), saved DatasetDicts by "
                        "split"
                        if self.format != "parquet"
                        else "set splits: from_file or remove split_column"
                    ),
                    self.split_column,
                )
            )
        if self.splits == "from_file" and self.test_fraction is not None:
            problems.append(
                (
                    "test_fraction",
                    "test_fraction_unused",
                    "the file's own test split is the test set: remove test_fraction, or set splits: carve",
                    self.test_fraction,
                )
            )
        if self.splits == "carve" and self.val_fraction + self.carved_test_fraction >= 1:
            problems.append(
                (
                    "test_fraction",
                    "fractions_too_large",
                    f"val_fraction ({self.val_fraction:g}) and test_fraction ({self.carved_test_fraction:g}) "
                    "leave nothing to train on: their sum must be below 1",
                    self.test_fraction,
                )
            )
        if self.metric is not None and self.metric != _METRIC[self.task]:
            known = self.metric in METRIC_HIGHER_IS_BETTER
            problems.append(
                (
                    "metric",
                    "metric_task",
                    (
                        f"metric {self.metric!r} does not fit {self.task}"
                        if known
                        else f"unknown metric {self.metric!r}"
                    )
                    + f": use {_METRIC[self.task]} (or leave metric out)",
                    self.metric,
                )
            )
        if self.max_len is not None and self.task != "token_classification":
            problems.append(
                (
                    "max_len",
                    "max_len_unused",
                    f"max_len is the padded length of token sequences (token_classification), not of {self.task}",
                    self.max_len,
                )
            )
        return problems

    # --- what the declaration is, in the registry's words ----------------------------------------------
    @property
    def source(self) -> str:
        return f"user_files:{self.path}"

    @property
    def family(self) -> str:
        return _FAMILY[self.task]

    @property
    def bundle_task(self) -> str:
        """The task of the built bundle and of the record (tabular_regression is the bundle's regression)."""
        return _BUNDLE_TASK[self.task]

    @property
    def carved_test_fraction(self) -> float:
        return DEFAULT_TEST_FRACTION if self.test_fraction is None else self.test_fraction

    def task_fields(self, facts: Mapping[str, Any]) -> dict[str, Any]:
        """The task fields of the built bundle (DatasetBundle.model_fields) from the checked facts."""
        if self.task == "image_classification":
            return {
                "image_size": int(facts["image_side"]),
                "in_channels": int(facts["channels"]),
                "num_classes": int(facts["classes"]),
            }
        if self.task == "tabular_regression":
            return {"num_features": int(facts["features"]), "num_outputs": 1}
        return {
            "vocab_size": int(facts["vocab_size"]),
            "max_len": int(self.max_len or DEFAULT_MAX_LEN),
            "num_classes": int(facts["tags"]),
            "head": "token",
            "pad_id": PAD_ID,
        }

    def record(self, facts: Mapping[str, Any] | None = None) -> Dataset:
        """The dataset's registry record; with the facts of its checked files (check_user_dataset), also
        its class count, size and task fields, which sizing reads. None: the stored facts, if any."""
        facts = self.facts if facts is None else facts
        family = self.family
        description = (
            self.description or f"{self.task} data from the user's files at {self.path} ({self.format})"
        )
        metric = self.metric or _METRIC[self.task]
        common: dict[str, Any] = {
            "metric": metric,
            "higher_is_better": METRIC_HIGHER_IS_BETTER[metric],
            "task": self.bundle_task,
            "default_model": _DEFAULT_MODEL[family],
            "description": description,
            "source": self.source,
        }
        if not facts:
            return Dataset(self.name, family, **common)  # type: ignore[arg-type]
        if facts.get("task") not in (None, self.bundle_task):
            raise ValueError(f"the facts are of {facts['task']} data, the declaration of {self.bundle_task}")
        fields = self.task_fields(facts)
        estimated = None
        if self.task == "token_classification" and not _exact_vocabulary(facts):
            estimated = (
                f"a vocabulary of at most {fields['vocab_size']:,} words (every word of the file; it is "
                "fitted on the training split)"
            )
        image = self.task == "image_classification"
        return Dataset(
            self.name,
            family,  # type: ignore[arg-type]
            classes=int(facts["classes"]) if image else None,
            train_examples=int(facts["examples"]["train"]) if "examples" in facts else None,
            image_side=int(facts["image_side"]) if image else None,
            task_fields=fields,
            estimated=estimated,
            **common,
        )


def _exact_vocabulary(facts: Mapping[str, Any]) -> bool:
    return bool(facts.get("vocabulary_exact", False))
