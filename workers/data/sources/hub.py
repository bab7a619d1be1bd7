"""Hugging Face `datasets` downloads turned into plain numpy arrays.

`datasets` is imported lazily and `datasets.load_dataset` is looked up at call time, so tests can replace
it with a stub that returns small in-memory datasets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["class_label_names", "images_and_labels", "load_hub", "texts", "token_sequences"]


def load_hub(path: str, name: str | None = None) -> Any:
    """All splits of a Hub dataset (a DatasetDict)."""
    import datasets

    return datasets.load_dataset(path, name) if name else datasets.load_dataset(path)


def _first_present(columns: Sequence[str], candidates: Sequence[str], what: str) -> str:
    for candidate in candidates:
        if candidate in columns:
            return candidate
    raise KeyError(f"no {what} column among {list(columns)} (expected one of {list(candidates)})")


def images_and_labels(split: Any, label_column: str = "label") -> tuple[np.ndarray, np.ndarray]:
    """(uint8 (N, H, W, C), int64 (N,)) from a split whose image column holds PIL images or arrays."""
    image_column = _first_present(split.column_names, ("image", "img"), "image")
    images = [np.asarray(image, dtype=np.uint8) for image in split[image_column]]
    x = np.stack(images)
    if x.ndim == 3:  # grayscale (N, H, W) -> (N, H, W, 1)
        x = x[..., None]
    y = np.asarray(split[label_column], dtype=np.int64)
    return x, y


def class_label_names(split: Any, column: str) -> list[str] | None:
    """Names of a ClassLabel column (or of a Sequence of ClassLabel), None if the column holds raw values."""
    feature = split.features[column]
    inner = getattr(feature, "feature", None)  # Sequence(ClassLabel) / List(ClassLabel)
    for candidate in (feature, inner):
        names = getattr(candidate, "names", None)
        if names:
            return list(names)
    return None


def texts(split: Any, column: str) -> np.ndarray:
    """Column of strings as a numpy str array."""
    return np.asarray([str(text) for text in split[column]], dtype=str)


def token_sequences(
    split: Any, token_candidates: Sequence[str], tag_candidates: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Token and tag sequences as space-joined str arrays (tags by name even when stored as ClassLabel ids)."""
    token_column = _first_present(split.column_names, token_candidates, "token")
    tag_column = _first_present(split.column_names, tag_candidates, "tag")
    names = class_label_names(split, tag_column)
    sentences, tag_lines = [], []
    for tokens, tags in zip(split[token_column], split[tag_column], strict=True):
        if len(tokens) != len(tags):
            raise ValueError(f"{len(tokens)} tokens but {len(tags)} tags in one sentence")
        tag_names = [names[int(tag)] if names else str(tag) for tag in tags]
        # Tokens never contain spaces in these corpora; guard anyway so the space-join round-trips.
        sentences.append(" ".join(token.replace(" ", "_") for token in tokens))
        tag_lines.append(" ".join(tag_names))
    return np.asarray(sentences, dtype=str), np.asarray(tag_lines, dtype=str)
