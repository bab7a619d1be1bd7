"""A dataset from the user's own files (studies.spec.user_data.UserDataset): check them, build them, register
them.

`check_user_dataset` opens the files without torch (numpy, pyarrow, datasets.load_from_disk) and returns
the facts the dataset's record states (examples per split, classes, image side and channels, feature
count, vocabulary and tag counts), or raises a UserDataError naming the file, the key or column and the
fix. `load_user_dataset` builds the splits into a DatasetBundle through workers.data.arrays, the path a
coded plugin's dataset takes too; `register_user_dataset` registers the record in normlab.REGISTRY with a
builder, so get_dataset builds it by name like any registered dataset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from normlab.arrays import ArrayDataset
from normlab.records import Dataset
from normlab.registry import REGISTRY
from studies.spec.user_data import UserDataset
from workers.data.arrays import CheckedArrays, Describe, UserDataError, bundle_from_record, check_arrays

if TYPE_CHECKING:
    import pyarrow as pa

    from workers.data.bundle import DatasetBundle

__all__ = ["UserDataError", "check_user_dataset", "load_user_dataset", "register_user_dataset"]

SPLITS = ("train", "val", "test")
# A file's own split names, as npz keys, parquet split values and saved DatasetDict splits spell them.
_SPLIT_NAMES = {
    "train": "train",
    "val": "val",
    "validation": "val",
    "valid": "val",
    "dev": "val",
    "test": "test",
}


def _declared(declaration: Mapping[str, Any] | UserDataset) -> UserDataset:
    return declaration if isinstance(declaration, UserDataset) else UserDataset.model_validate(declaration)


def check_user_dataset(declaration: Mapping[str, Any] | UserDataset) -> dict[str, Any]:
    """The facts of the declared files (JSON-ready), after every check; a UserDataError if they cannot be
    trained on. Imports no torch."""
    checked = _checked(_declared(declaration))
    return _json_ready(checked.facts)


def load_user_dataset(declaration: Mapping[str, Any] | UserDataset, *, split_seed: int) -> DatasetBundle:
    """Ready tensors of the declared files: the splits the declaration names, built as the built-in
    datasets of the same task are. The declaration's `seed`, where set, carves instead of `split_seed`."""
    user = _declared(declaration)
    checked = _checked(user)
    return bundle_from_record(user.record(checked.facts), checked, split_seed=split_seed, source=user.source)


def register_user_dataset(
    declaration: Mapping[str, Any] | UserDataset, *, facts: Mapping[str, Any] | None = None
) -> Dataset:
    """Register the declared dataset in normlab.REGISTRY.datasets with its builder (get_dataset builds it
    by name). `facts`: those an earlier check_user_dataset returned (the study's stored ones); None checks
    the files now. Registering the same declaration again is a no-op."""
    user = _declared(declaration)
    record = user.record(check_user_dataset(user) if facts is None else facts)
    return REGISTRY.datasets.add(replace(record, build=partial(_build, user)))


def _build(user: UserDataset, split_seed: int) -> CheckedArrays:
    """A registered user dataset's builder: its checked arrays (the seed carves them in bundle_from_record)."""
    return _checked(user)


def _checked(user: UserDataset) -> CheckedArrays:
    reader = {"npz": _read_npz, "parquet": _read_parquet, "hf_disk": _read_hf_disk}[str(user.format)]
    arrays, describe, feature_names = reader(user)
    return check_arrays(
        arrays, name=user.name, describe=describe, where=user.path, feature_names=feature_names
    )


def _json_ready(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _arrays(user: UserDataset, pools: Mapping[str, tuple[Any, Any]], **extra: Any) -> ArrayDataset:
    return ArrayDataset(
        task=user.bundle_task,  # type: ignore[arg-type]
        train=pools["train"],
        val=pools.get("val"),
        test=pools.get("test"),
        max_len=user.max_len,
        val_fraction=user.val_fraction,
        test_fraction=user.carved_test_fraction,
        split_seed=user.seed,
        **extra,
    )


def _existing(user: UserDataset, *, directory: bool) -> Path:
    path = Path(user.path)
    if not path.exists():
        raise UserDataError(
            f"{user.path}: no such {'directory' if directory else 'file'} on this node; copy the data to the "
            "cluster's shared volume at that path, or fix path"
        )
    if directory and not path.is_dir():
        raise UserDataError(
            f"{user.path} is a file; a Hugging Face dataset saved with save_to_disk is a directory: set path "
            "to that directory, or set format to the file's (npz or parquet)"
        )
    if not directory and path.is_dir():
        raise UserDataError(
            f"{user.path} is a directory; {user.format} is one file: set path to the file, or format: "
            "hf_disk for a directory written by save_to_disk"
        )
    return path


def _missing(
    where: str, kind: str, name: str, field: str, present: Sequence[str], hint: str = ""
) -> UserDataError:
    listed = ", ".join(repr(p) for p in present) or "none"
    return UserDataError(
        f"{where} has no {kind} {name!r} (it has {listed}): set {field} to the {kind} that holds it" + hint
    )


# --- npz --------------------------------------------------------------------------------------------------
def _read_npz(user: UserDataset) -> tuple[ArrayDataset, Describe, None]:
    path = _existing(user, directory=False)
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as error:
        raise UserDataError(
            f"{user.path} cannot be read as npz ({type(error).__name__}: {error}): write it with "
            "numpy.savez(path, x=..., y=...), or set format to the file's"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise UserDataError(
            f"{user.path} holds one array (a .npy file), not named arrays: write it with "
            "numpy.savez(path, x=..., y=...)"
        )
    with archive:
        keys = list(archive.files)
        x, y = str(user.x), str(user.y)
        if user.splits == "carve":
            names = {"train": (x, y)}
            if x not in keys and f"{x}_train" in keys:
                raise UserDataError(
                    f"{user.path} has no key {x!r} but has its own splits ({', '.join(keys)}): set splits: "
                    "from_file, or save one pool as x and y"
                )
        else:
            names = {split: (f"{x}_{split}", f"{y}_{split}") for split in SPLITS}
            if f"{x}_val" not in keys and f"{y}_val" not in keys:
                del names["val"]
            if f"{x}_test" not in keys and f"{y}_test" not in keys:
                raise UserDataError(
                    f"{user.path} has no test split (keys {x}_test and {y}_test; it has {', '.join(keys)}): "
                    f"splits: from_file reads the file's own train and test splits; add them, or set splits: "
                    "carve to carve a test set from the file"
                )
        pools = {}
        for split, pair in names.items():
            for key, field in zip(pair, ("x", "y"), strict=True):
                if key not in keys:
                    raise _missing(user.path, "key", key, field, keys)
            pools[split] = (_npz_array(archive, pair[0], user.path), _npz_array(archive, pair[1], user.path))
    key_of = {split: dict(zip(("x", "y"), pair, strict=True)) for split, pair in names.items()}
    return _arrays(user, pools), lambda split, part: f"key {key_of[split][part]!r} of {user.path}", None


def _npz_array(archive: Any, key: str, where: str) -> np.ndarray:
    try:
        return np.asarray(archive[key])
    except ValueError as error:  # an object array, which only a pickle can hold
        raise UserDataError(
            f"key {key!r} of {where} holds Python objects ({error}); store a numeric array, or a str array "
            "of space-joined tokens"
        ) from None


# --- parquet ----------------------------------------------------------------------------------------------
def _read_parquet(user: UserDataset) -> tuple[ArrayDataset, Describe, list[str] | None]:
    import pyarrow.parquet as pq

    path = _existing(user, directory=False)
    try:
        table = pq.read_table(path)
    except Exception as error:
        raise UserDataError(
            f"{user.path} cannot be read as parquet ({type(error).__name__}: {error}): write it with "
            "pandas.DataFrame.to_parquet or pyarrow.parquet.write_table, or set format to the file's"
        ) from None
    tables: dict[str, pa.Table] = {"train": table}
    if user.splits == "from_file":
        tables = _parquet_splits(user, table)

    def located(split: str) -> str:
        rows = f" (rows where {user.split_column} is {split})" if user.splits == "from_file" else ""
        return f"of {user.path}{rows}"

    return _from_tables(user, tables, located, {})


def _parquet_splits(user: UserDataset, table: pa.Table) -> dict[str, pa.Table]:
    import pyarrow as pa

    column = str(user.split_column)
    if column not in table.column_names:
        raise _missing(
            user.path, "column", column, "split_column", table.column_names, " (its values: train, val, test)"
        )
    values = [str(v) for v in table.column(column).to_pylist()]
    unknown = sorted({v for v in values if v not in _SPLIT_NAMES})
    if unknown:
        raise UserDataError(
            f"column {column!r} of {user.path} holds split names {unknown}; use train, val (or validation) "
            "and test"
        )
    names = np.array([_SPLIT_NAMES[v] for v in values])
    if "test" not in names:
        raise UserDataError(
            f"column {column!r} of {user.path} names no test rows: splits: from_file reads the file's own "
            "train and test splits; mark the test rows, or set splits: carve"
        )
    if "train" not in names:
        raise UserDataError(f"column {column!r} of {user.path} names no train rows: mark the training rows")
    return {split: table.filter(pa.array(names == split)) for split in SPLITS if (names == split).any()}


# --- tables (parquet, and a saved Hugging Face dataset's Arrow tables) ----------------------------------------
def _from_tables(
    user: UserDataset,
    tables: Mapping[str, pa.Table],
    located: Callable[[str], str],
    tag_names: Mapping[str, Any],
) -> tuple[ArrayDataset, Describe, list[str] | None]:
    """`located(split)`: where a split's columns live, as messages say it after a column's name."""
    columns = list(tables["train"].column_names)
    _same_columns(user, {split: list(table.column_names) for split, table in tables.items()}, located)
    y = str(user.y)
    if user.task == "tabular_regression":
        skip = {y, user.split_column}
        features = list(user.features) if user.features is not None else [c for c in columns if c not in skip]
        for name in [*features, y]:
            if name not in columns:
                field = "y" if name == y else "features"
                raise _missing(user.path, "column", name, field, columns)
        if not features:
            raise UserDataError(f"{user.path} has no feature columns besides {y!r}: add features")
        pools = {
            split: (_feature_matrix(table, features, user.path), _numeric_column(table, y, user.path))
            for split, table in tables.items()
        }
        listed = (
            ", ".join(features) if len(features) <= 6 else f"{', '.join(features[:6])}, ... ({len(features)})"
        )

        def describe(split: str, part: str) -> str:
            named = f"the feature columns ({listed})" if part == "x" else f"column {y!r}"
            return f"{named} {located(split)}"

        return _arrays(user, pools), describe, features
    x = str(user.x)
    for name, field in ((x, "x"), (y, "y")):
        if name not in columns:
            raise _missing(user.path, "column", name, field, columns)
    pools = {
        split: (table.column(x).to_pylist(), table.column(y).to_pylist()) for split, table in tables.items()
    }

    def describe_tokens(split: str, part: str) -> str:
        return f"column {(x if part == 'x' else y)!r} {located(split)}"

    return _arrays(user, pools, **tag_names), describe_tokens, None


def _same_columns(user: UserDataset, columns: Mapping[str, list[str]], located: Callable[[str], str]) -> None:
    for split, names in columns.items():
        if set(names) != set(columns["train"]):
            raise UserDataError(
                f"the columns {located(split)} ({', '.join(names)}) differ from those {located('train')} "
                f"({', '.join(columns['train'])}): give every split the same columns"
            )


def _numeric(table: pa.Table, name: str, where: str, what: str) -> np.ndarray:
    import pyarrow as pa

    kind = table.schema.field(name).type
    if not (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_decimal(kind)
    ):
        raise UserDataError(
            f"column {name!r} of {where} holds {kind} values; {what} must be numbers: encode it as numbers"
            + (" or leave it out of features" if what == "features" else "")
        )
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)


def _feature_matrix(table: pa.Table, features: Sequence[str], where: str) -> np.ndarray:
    if not features:
        return np.zeros((table.num_rows, 0))
    return np.stack([_numeric(table, name, where, "features") for name in features], axis=1)


def _numeric_column(table: pa.Table, name: str, where: str) -> np.ndarray:
    return _numeric(table, name, where, "the target")


# --- a Hugging Face dataset saved with save_to_disk -----------------------------------------------------------
def _read_hf_disk(user: UserDataset) -> tuple[ArrayDataset, Describe, list[str] | None]:
    from datasets import DatasetDict, load_from_disk

    _existing(user, directory=True)
    try:
        loaded = load_from_disk(user.path)
    except Exception as error:
        raise UserDataError(
            f"{user.path} cannot be read as a Hugging Face dataset saved with save_to_disk "
            f"({type(error).__name__}: {error}): write it with Dataset.save_to_disk or DatasetDict.save_to_disk"
        ) from None
    if isinstance(loaded, DatasetDict):
        own = {name: _SPLIT_NAMES.get(name) for name in loaded}
        if user.splits == "carve":
            if len(loaded) != 1:
                raise UserDataError(
                    f"{user.path} holds the splits {', '.join(loaded)}: set splits: from_file to use them, or "
                    "save one Dataset to carve the splits from"
                )
            parts = {"train": next(iter(loaded.values()))}
            hf_split = {"train": next(iter(loaded))}
        else:
            unknown = [name for name, split in own.items() if split is None]
            if unknown:
                raise UserDataError(
                    f"{user.path} holds splits {unknown} besides train, validation and test: save only those"
                )
            parts = {split: loaded[name] for name, split in own.items() if split is not None}
            hf_split = {split: name for name, split in own.items() if split is not None}
            for needed in ("train", "test"):
                if needed not in parts:
                    raise UserDataError(
                        f"{user.path} has no {needed} split (it has {', '.join(loaded)}): splits: from_file "
                        f"reads the dataset's own train and test splits; save a DatasetDict with both, or set "
                        "splits: carve"
                    )
    else:
        if user.splits == "from_file":
            raise UserDataError(
                f"{user.path} holds one Dataset, without splits: set splits: carve, or save a DatasetDict "
                "with train and test splits"
            )
        parts = {"train": loaded}
        hf_split = {"train": ""}

    def located(split: str) -> str:
        return f"of {user.path}" + (f", split {hf_split[split]!r}" if hf_split[split] else "")

    first = parts["train"]
    if user.task == "image_classification":
        return _hf_images(user, parts, located)
    tag_names: dict[str, Any] = {}
    if user.task == "token_classification" and user.y in first.column_names:
        inner = getattr(first.features[user.y], "feature", None)
        names = getattr(inner, "names", None)
        if names:
            tag_names["class_names"] = tuple(names)
    tables = {split: part.with_format("arrow")[:] for split, part in parts.items()}
    return _from_tables(user, tables, located, tag_names)


def _hf_images(
    user: UserDataset, parts: Mapping[str, Any], located: Callable[[str], str]
) -> tuple[ArrayDataset, Describe, None]:
    x, y = str(user.x), str(user.y)
    columns = list(parts["train"].column_names)
    _same_columns(user, {split: list(part.column_names) for split, part in parts.items()}, located)
    for name, field in ((x, "x"), (y, "y")):
        if name not in columns:
            raise _missing(user.path, "column", name, field, columns)
    class_names = getattr(parts["train"].features[y], "names", None)
    pools = {}
    for split, part in parts.items():
        where = f"column {x!r} {located(split)}"
        pools[split] = (_image_stack(part[x], where), np.asarray(part[y]))
    extra = {"class_names": tuple(class_names)} if class_names else {}
    return (
        _arrays(user, pools, **extra),
        lambda split, part: f"column {(x if part == 'x' else y)!r} {located(split)}",
        None,
    )


def _image_stack(images: Sequence[Any], where: str) -> np.ndarray:
    arrays: list[np.ndarray] = []
    for row, image in enumerate(images):
        if hasattr(image, "convert") and getattr(image, "mode", "L") not in ("L", "RGB"):  # a PIL image
            image = image.convert("L" if image.mode in ("1", "I", "I;16", "F") else "RGB")
        array = np.asarray(image)
        if arrays and array.shape != arrays[0].shape:
            raise UserDataError(
                f"{where} holds images of different sizes (row 0: {arrays[0].shape}, row {row}: {array.shape}): "
                "resize them to one size"
            )
        arrays.append(array)
    if not arrays:
        return np.zeros((0, 1, 1), dtype=np.uint8)
    return np.stack(arrays)
