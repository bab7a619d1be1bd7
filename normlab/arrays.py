"""What a coded dataset's builder returns: its splits as arrays, and the task they are for.

    from normlab.arrays import ArrayDataset
    from normlab.plugin import dataset

    @dataset("stripes", family="image", task="image_classification", classes=2)
    def build(split_seed: int) -> ArrayDataset:
        x, y = make_images()  # uint8 (N, H, W, C) and int labels 0..K-1
        return ArrayDataset("image_classification", train=(x, y))

The workers turn it into ready tensors exactly as they do a dataset from the user's files: images scaled
and standardised like the built-in image datasets, tabular features and target standardised like the
built-in tabular ones, token sequences padded like ptb_pos; every statistic fitted on the training split.
A split left out (val, or val and test) is carved from the training pool by the study's split seed, so a
builder that returns one pool needs no split code of its own.

Plain Python: numpy is named for the annotations only, so every layer may import this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ARRAY_TASKS", "ArrayDataset", "ArrayTask", "Split"]

ArrayTask = Literal["image_classification", "regression", "token_classification"]
# The tasks a builder may return. Inputs and labels of each split:
#   image_classification  x: (N, H, W) or (N, H, W, C) square images, uint8 0..255 or floats in [0, 1]
#                         (channels-first (N, C, H, W) is accepted where it cannot be mistaken);
#                         y: (N,) integer class ids 0..K-1
#   regression            x: (N, F) finite numbers; y: (N,) finite numbers (the target)
#   token_classification  x: N sentences, each a list of tokens or one space-joined string;
#                         y: N tag sequences of the same lengths (strings, or integer tag ids)
ARRAY_TASKS: tuple[str, ...] = ("image_classification", "regression", "token_classification")

# One split: (inputs, labels), numpy arrays or plain sequences.
Split = tuple[Union["np.ndarray", Sequence[Any]], Union["np.ndarray", Sequence[Any]]]


@dataclass(frozen=True)
class ArrayDataset:
    """A dataset's splits as arrays.

    `val` and `test` may be left out: the missing ones are carved from `train` by the study's split seed
    (`val_fraction`, `test_fraction` of it), or by `split_seed` where the builder fixes one. A `val`
    without a `test` is refused (give both, or only the test split).
    `classes` is the number of classes of a classification head (default: the largest label + 1);
    `class_names` names them in label order. `max_len` is the padded length of token sequences (128)."""

    task: ArrayTask
    train: Split
    val: Split | None = None
    test: Split | None = None
    classes: int | None = None
    class_names: tuple[str, ...] | None = None
    max_len: int | None = None
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    split_seed: int | None = None
