"""Find a dataset's raw arrays: the cache dir, then known offline locations, then the real downloader.

Downloads run under a FileLock in the cache dir (many Ray trials may start on one node at once) and are
stored as compressed .npz, so the second call never touches the network. Offline sources are read in
place and not copied into the cache (the WSJ sample's licence allows run-time reading only).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from filelock import FileLock

from workers.data.errors import DataUnavailableError
from workers.data.locations import cache_dir, offline_dir

__all__ = ["LOCK_TIMEOUT_S", "OfflineLocation", "RawArrays", "RawSource", "resolve_raw"]

# Raw arrays of one dataset. Keys: train_x, train_y and optionally val_x/val_y, test_x/test_y (official
# splits). Images uint8 (N, H, W, C); text as str arrays of space-joined tokens; tabular float64.
RawArrays = dict[str, np.ndarray]

# A download of CIFAR-100 or SVHN can take minutes; other processes wait for it rather than start their own.
LOCK_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class OfflineLocation:
    """A place the data may already be on disk. `load` returns None when its files are not there."""

    description: str
    load: Callable[[], RawArrays | None]


@dataclass(frozen=True)
class RawSource:
    """How to obtain one dataset's raw arrays."""

    cache_key: str
    offline: tuple[OfflineLocation, ...] = ()
    download: Callable[[], RawArrays] | None = None
    download_description: str = ""
    # Licensed data that no installer or downloader may fetch: what the user must supply, and what is
    # wrong with what they supplied. It replaces the generic advice (make data-offline, network, cache),
    # none of which can get such data.
    supplied_by_user: Callable[[], str] | None = None


def _cache_path(source: RawSource, root: str | os.PathLike[str] | None) -> Path:
    return cache_dir(root) / f"{source.cache_key}.npz"


def _load_npz(path: Path) -> RawArrays:
    with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


def _save_npz_atomically(path: Path, arrays: RawArrays) -> None:
    # A reader must never see a half-written file, so write next to it and rename.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez_compressed(handle, **arrays)  # type: ignore[arg-type]  # numpy's stub reads **kwds as allow_pickle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _how_to_get(source: RawSource, cached: Path) -> str:
    if source.supplied_by_user is not None:
        return source.supplied_by_user()
    ways = []
    if source.offline:
        ways.append(
            "run `make data-offline` (installs the offline sources into "
            f"NORMLAB_OFFLINE_DATA={offline_dir()}); looked in: "
            + "; ".join(location.description for location in source.offline)
        )
    if source.download is not None:
        ways.append(f"allow a download with network access ({source.download_description})")
    ways.append(f"or place the arrays at {cached} (the cache, NORMLAB_DATA_DIR/datasets)")
    return "; ".join(ways)


def resolve_raw(
    source: RawSource,
    *,
    root: str | os.PathLike[str] | None = None,
    download: bool = True,
) -> tuple[RawArrays, str]:
    """Return (arrays, origin) where origin is "cache:<path>", "offline:<where>" or "download:<what>"."""
    cached = _cache_path(source, root)
    if cached.is_file():
        return _load_npz(cached), f"cache:{cached}"
    for location in source.offline:
        arrays = location.load()
        if arrays is not None:
            return arrays, f"offline:{location.description}"
    if source.download is None or not download:
        reason = "no download source exists" if source.download is None else "download=False"
        raise DataUnavailableError(
            f"dataset '{source.cache_key}' is not available ({reason}). To get it: {_how_to_get(source, cached)}."
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cached.with_suffix(".lock")), timeout=LOCK_TIMEOUT_S):
        if cached.is_file():  # another process finished the download while we waited
            return _load_npz(cached), f"cache:{cached}"
        try:
            arrays = source.download()
        except DataUnavailableError:
            raise
        except Exception as error:
            raise DataUnavailableError(
                f"dataset '{source.cache_key}': download from {source.download_description} failed "
                f"({type(error).__name__}: {error}). To get it: {_how_to_get(source, cached)}."
            ) from error
        _save_npz_atomically(cached, arrays)
    return arrays, f"download:{source.download_description}"
