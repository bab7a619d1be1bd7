"""The published CIFAR-10-C (Hendrycks & Dietterich, 2019): Zenodo record 2535967, CIFAR-10-C.tar.

The tar (2,918,471,680 bytes) holds one uint8 array (50000, 32, 32, 3) per corruption, severities 1..5
stacked in blocks of 10,000 test images, and labels.npy (50000,). Looked up in order:
$NORMLAB_OFFLINE_DATA/CIFAR-10-C (an extracted copy), the cache <data root>/datasets/cifar10_c_hendrycks,
then a download. The download is streamed: the .npy members are extracted straight into the cache (no copy
of the tar on disk), the MD5 Zenodo lists is checked, and the files appear only once all are complete.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from filelock import FileLock

from studies.datasets import PUBLISHED_CORRUPTIONS
from workers.data.corruptions import SEVERITIES, CorruptionSets, eval_set_key
from workers.data.errors import DataUnavailableError
from workers.data.locations import cache_dir, offline_dir
from workers.data.resolve import LOCK_TIMEOUT_S

__all__ = [
    "CIFAR10_C_MD5",
    "CIFAR10_C_URL",
    "HENDRYCKS_CORRUPTIONS",
    "cifar10_c_cache_dir",
    "cifar10_c_offline_dir",
    "hendrycks_corruption_sets",
    "locate_cifar10_c",
]

CIFAR10_C_URL = "https://zenodo.org/records/2535967/files/CIFAR-10-C.tar?download=1"
CIFAR10_C_MD5: str | None = "56bf5dcef84df0e2308c6dcbcbbd8499"  # as Zenodo lists it; None skips the check

# The 15 benchmark corruptions, then the 4 extra ones the release ships (speckle_noise, gaussian_blur,
# spatter, saturate; held out for validation in the paper): one <name>.npy each. The names are
# studies.datasets' (the service validates a spec's corruptions against them without torch).
HENDRYCKS_CORRUPTIONS: tuple[str, ...] = PUBLISHED_CORRUPTIONS
_LABELS = "labels.npy"
_FILES = frozenset({_LABELS, *(f"{name}.npy" for name in HENDRYCKS_CORRUPTIONS)})
_CHUNK = 1 << 20


def cifar10_c_cache_dir(root: str | os.PathLike[str] | None = None) -> Path:
    return cache_dir(root) / "cifar10_c_hendrycks"


def cifar10_c_offline_dir() -> Path:
    return offline_dir() / "CIFAR-10-C"


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in _FILES)


def _how_to_get(cached: Path) -> str:
    return (
        f"allow a download with network access ({CIFAR10_C_URL}, 2.9 GB), or extract CIFAR-10-C.tar so that "
        f"{cifar10_c_offline_dir()}/<corruption>.npy and labels.npy exist, or place those files in {cached}"
    )


def locate_cifar10_c(root: str | os.PathLike[str] | None = None, *, download: bool = True) -> Path:
    """The directory holding the 19 corruption arrays and labels.npy, downloading them when allowed."""
    cached = cifar10_c_cache_dir(root)
    for directory in (cifar10_c_offline_dir(), cached):
        if _complete(directory):
            return directory
    if not download:
        raise DataUnavailableError(
            f"the published CIFAR-10-C is not available (download=False). To get it: {_how_to_get(cached)}."
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cached.parent / "cifar10_c_hendrycks.lock"), timeout=LOCK_TIMEOUT_S):
        if _complete(cached):  # another process finished the download while we waited
            return cached
        try:
            _download_into(cached)
        except Exception as error:
            raise DataUnavailableError(
                f"the published CIFAR-10-C: download from Zenodo ({CIFAR10_C_URL}) failed "
                f"({type(error).__name__}: {error}). To get it: {_how_to_get(cached)}."
            ) from error
    return cached


class _HashingReader:
    """A read-only stream that hashes what passes through (tarfile reads it front to back)."""

    def __init__(self, stream: Any) -> None:  # an HTTP response or any object with read()
        self.stream = stream
        self.md5 = hashlib.md5()  # integrity check against the MD5 Zenodo lists, not security

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.md5.update(data)
        return data

    def drain(self) -> None:
        """Hash the bytes tarfile never asked for (end-of-archive padding)."""
        while self.read(_CHUNK):
            pass


def _download_into(target: Path) -> None:
    partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        request = urllib.request.Request(CIFAR10_C_URL, headers={"User-Agent": "normlab-data/0.1"})
        with urllib.request.urlopen(request, timeout=120) as response:
            reader = _HashingReader(response)
            # Streamed: members in tar order. Stream mode only reads, but typeshed asks any fileobj for a
            # seekable file's methods.
            with tarfile.open(fileobj=reader, mode="r|") as archive:  # type: ignore[call-overload]
                for member in archive:
                    name = PurePosixPath(member.name).name
                    if not member.isfile() or name not in _FILES:
                        continue
                    source = archive.extractfile(member)
                    assert source is not None
                    with open(partial / name, "wb") as out:
                        shutil.copyfileobj(source, out, _CHUNK)
            reader.drain()
        if CIFAR10_C_MD5 is not None and reader.md5.hexdigest() != CIFAR10_C_MD5:
            raise ValueError(f"MD5 {reader.md5.hexdigest()} of the archive, expected {CIFAR10_C_MD5}")
        missing = sorted(_FILES - {path.name for path in partial.iterdir()})
        if missing:
            raise ValueError(f"the archive lacks {', '.join(missing)}")
        if target.exists():  # an earlier, incomplete copy someone placed there
            shutil.rmtree(target)
        os.replace(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def hendrycks_corruption_sets(
    corruptions: Sequence[str],
    severities: Sequence[int],
    *,
    root: str | os.PathLike[str] | None = None,
    download: bool = True,
) -> CorruptionSets:
    """The published arrays of every chosen corruption at every chosen severity, with their own labels."""
    unknown = [name for name in corruptions if name not in HENDRYCKS_CORRUPTIONS]
    if unknown:
        raise ValueError(f"unknown CIFAR-10-C corruptions {unknown}; known: {list(HENDRYCKS_CORRUPTIONS)}")

    def build(test_images: np.ndarray, labels: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        directory = locate_cifar10_c(root, download=download)
        all_labels = np.load(directory / _LABELS)
        per_severity = len(all_labels) // len(SEVERITIES)
        if per_severity * len(SEVERITIES) != len(all_labels) or per_severity != len(test_images):
            raise ValueError(
                f"CIFAR-10-C in {directory} holds {len(all_labels)} labels; expected 5 severities x "
                f"{len(test_images)} test images"
            )
        several = len(severities) > 1
        sets = {}
        for name in corruptions:
            images = np.load(directory / f"{name}.npy", mmap_mode="r")  # (50000, 32, 32, 3) uint8
            for severity in severities:
                block = slice((severity - 1) * per_severity, severity * per_severity)
                sets[eval_set_key(name, severity, several_severities=several)] = (
                    np.asarray(images[block]),
                    all_labels[block].astype(np.int64),
                )
        return sets

    return build
