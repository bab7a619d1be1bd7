"""The one error the registry raises when a dataset cannot be found anywhere."""

from __future__ import annotations

__all__ = ["DataUnavailableError"]


class DataUnavailableError(RuntimeError):
    """No cached copy, no offline source and no (permitted or working) download for a dataset.

    The message always says how to get the data: `make data-offline`, the cache path to fill, or network.
    """
