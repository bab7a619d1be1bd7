"""A dataset given as arrays -> a DatasetBundle: a coded plugin's builder (normlab.arrays.ArrayDataset) and a
dataset from the user's own files (workers.data.user_files) take this one path.

`check_arrays` checks and normalises the splits without torch (the user-file check runs it before any
trial starts) and states the facts sizing needs; `bundle_from_record` builds the splits through
workers.data.builders, exactly as the catalog's datasets are built: images scaled to [0, 1] and
standardised per channel, tabular features and target standardised, token sequences padded like ptb_pos.
Every error is a UserDataError naming the split, the key or column (`Describe`) and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from normlab.arrays import ARRAY_TASKS, ArrayDataset
from normlab.records import Dataset
from studies.datasets import FAMILY_BACKBONE

if TYPE_CHECKING:
    from workers.data.bundle import DatasetBundle

__all__ = [
    "DEFAULT_MAX_LEN",
    "TASK_FAMILY",
    "TASK_METRIC",
    "CheckedArrays",
    "Describe",
    "UserDataError",
    "bundle_from_record",
    "check_arrays",
    "split_sizes",
]

# The data family each task's inputs are, and the one metric that fits it.
TASK_FAMILY = {"image_classification": "image", "regression": "tabular", "token_classification": "text"}
TASK_METRIC = {"image_classification": "accuracy", "regression": "rmse", "token_classification": "accuracy"}
DEFAULT_MAX_LEN = 128  # token sequences are padded or truncated to this, as ptb_pos's are
SPLITS = ("train", "val", "test")
# Ids 0 and 1 of every vocabulary (workers.data.vocab.PAD and UNK), named here so the check needs no torch.
_RESERVED_TOKENS = frozenset({"<pad>", "<unk>"})

# (split, part) -> how an error names that split's inputs ("x") or labels ("y"): a key of a file, a column,
# a field of a plugin's ArrayDataset.
Describe = Callable[[str, str], str]


class UserDataError(ValueError):
    """A dataset's own data (the user's files, a plugin's arrays) that cannot be trained on; the message
    names the file or builder, the key or column, and the fix."""


@dataclass(frozen=True)
class CheckedArrays:
    """Splits that passed the checks, as workers.data.resolve.RawArrays (train_x, train_y, and val_*/test_*
    where given), plus what the builders need and the facts sizing reads."""

    task: str
    raw: dict[str, np.ndarray]
    classes: int | None
    class_names: tuple[str, ...] | None
    max_len: int | None
    val_fraction: float
    test_fraction: float
    split_seed: int | None
    facts: dict[str, Any] = field(default_factory=dict)


def _plugin_describe(name: str) -> Describe:
    def describe(split: str, part: str) -> str:
        what, index = ("inputs", 0) if part == "x" else ("labels", 1)
        return f"the {split} {what} ({split}[{index}]) of dataset {name!r}"

    return describe


def split_sizes(
    pools: Mapping[str, int], *, val_fraction: float, test_fraction: float, where: str
) -> dict[str, int]:
    """Examples per split once the missing splits are carved from the training pool, with the arithmetic
    of workers.data.splits.carve_splits; a pool too small for the fractions is a UserDataError."""
    if not 0 < val_fraction < 1 or not 0 < test_fraction < 1 or val_fraction + test_fraction >= 1:
        raise UserDataError(
            f"{where}: val_fraction ({val_fraction:g}) and test_fraction ({test_fraction:g}) must each lie in "
            "(0, 1) and sum to less than 1"
        )
    n = pools["train"]
    if "val" in pools and "test" in pools:
        sizes = dict(pools)
    else:
        n_val = max(1, round(n * val_fraction))
        n_test = pools["test"] if "test" in pools else max(1, round(n * test_fraction))
        carved = n_val + (0 if "test" in pools else n_test)
        if carved >= n:
            needed = "val_fraction" + ("" if "test" in pools else " and test_fraction")
            raise UserDataError(
                f"{where}: {n} training examples are too few for {needed} "
                f"(val {val_fraction:g}" + ("" if "test" in pools else f", test {test_fraction:g}") + f": "
                f"{carved} examples carved, none left to train on); supply more examples or lower the fractions"
            )
        sizes = {"train": n - carved, "val": n_val, "test": n_test}
    for split in SPLITS:
        if sizes[split] < 1:
            fix = "give it examples" + (
                "" if split == "train" else ", or leave it out to carve it from train"
            )
            raise UserDataError(f"{where}: the {split} split is empty; {fix}")
    return sizes


def check_arrays(
    arrays: ArrayDataset,
    *,
    name: str,
    describe: Describe | None = None,
    where: str | None = None,
    feature_names: Sequence[str] | None = None,
) -> CheckedArrays:
    """Check every split of `arrays` and normalise it for the builders (no torch).

    `describe` names a split's inputs or labels in messages (default: the ArrayDataset's fields);
    `where` names the dataset as a whole (default: "dataset '<name>'"); `feature_names` names tabular
    columns (a parquet file's) so a non-finite value is reported by column."""
    describe = describe or _plugin_describe(name)
    where = where or f"dataset {name!r}"
    if arrays.task not in ARRAY_TASKS:
        raise UserDataError(f"{where}: unknown task {arrays.task!r}; choose one of {', '.join(ARRAY_TASKS)}")
    given = {"train": arrays.train, "val": arrays.val, "test": arrays.test}
    if arrays.val is not None and arrays.test is None:
        raise UserDataError(
            f"{where}: a val split without a test split; give the test split too, or leave val out to carve "
            "both from train"
        )
    pairs = {split: pair for split, pair in given.items() if pair is not None}
    for split, pair in pairs.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise UserDataError(
                f"{where}: the {split} split must be an (inputs, labels) pair, got {type(pair).__name__}"
            )
    max_len = arrays.max_len
    if arrays.task == "token_classification":
        max_len = DEFAULT_MAX_LEN if max_len is None else max_len
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
            raise UserDataError(f"{where}: max_len must be a positive integer, got {max_len!r}")
    checker = {"image_classification": _check_images, "regression": _check_tabular}.get(
        arrays.task, _check_tokens
    )
    raw, facts, classes, class_names = checker(pairs, arrays, describe, feature_names)
    pools = {split: len(raw[f"{split}_y"]) for split in pairs}
    sizes = split_sizes(
        pools, val_fraction=arrays.val_fraction, test_fraction=arrays.test_fraction, where=where
    )
    if arrays.task == "token_classification":
        facts["max_len"] = max_len
    return CheckedArrays(
        task=arrays.task,
        raw=raw,
        classes=classes,
        class_names=class_names,
        max_len=max_len,
        val_fraction=arrays.val_fraction,
        test_fraction=arrays.test_fraction,
        split_seed=arrays.split_seed,
        facts={"task": arrays.task, "examples": sizes, "classes": classes, **facts},
    )


# --- the checks of each task --------------------------------------------------------------------------
Pairs = Mapping[str, Sequence[Any]]
Checked = tuple[dict[str, np.ndarray], dict[str, Any], int | None, tuple[str, ...] | None]


def _as_array(values: Any, what: str) -> np.ndarray:
    try:
        return np.asarray(values)
    except ValueError as error:  # ragged nested lists
        raise UserDataError(
            f"{what} is not a rectangular array ({error}); give every example the same shape"
        ) from None


def _same_length(x: Sized, y: Sized, describe: Describe, split: str) -> None:
    if len(x) != len(y):
        raise UserDataError(
            f"{describe(split, 'x')} has {len(x)} examples but {describe(split, 'y')} has {len(y)}: the inputs "
            "and labels must be aligned, one label per example"
        )


def _rows(mask: np.ndarray) -> str:
    bad = np.flatnonzero(mask)
    return f"{len(bad)} row{'s' if len(bad) != 1 else ''} (first: row {int(bad[0])})"


def _class_labels(values: Any, describe: Describe, split: str) -> np.ndarray:
    what = describe(split, "y")
    y = _as_array(values, what)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise UserDataError(
            f"{what} has shape {y.shape}; class labels are one integer per example, shape (N,)"
        )
    if y.dtype.kind == "b":
        y = y.astype(np.int64)
    if y.dtype.kind == "f":
        finite = np.isfinite(y)
        if not finite.all() or (y[finite] != np.round(y[finite])).any():
            bad = ~finite | (y != np.round(np.where(finite, y, 0)))
            raise UserDataError(
                f"{what} holds non-integer class labels in {_rows(bad)}: labels must be integers 0..K-1"
            )
        y = y.astype(np.int64)
    if y.dtype.kind not in "iu":
        raise UserDataError(
            f"{what} holds {y.dtype} values; class labels must be integers 0..K-1 (map names to class ids)"
        )
    y = y.astype(np.int64)
    if len(y) and y.min() < 0:
        raise UserDataError(
            f"{what} holds negative class labels in {_rows(y < 0)}: labels must be integers 0..K-1"
        )
    return y


def _head_size(
    labels: Mapping[str, np.ndarray], arrays: ArrayDataset, describe: Describe
) -> tuple[int, tuple[str, ...] | None]:
    names = tuple(str(n) for n in arrays.class_names) if arrays.class_names is not None else None
    largest = max((int(y.max()) for y in labels.values() if len(y)), default=-1)
    classes = (
        arrays.classes if arrays.classes is not None else (len(names) if names is not None else largest + 1)
    )
    if names is not None and len(names) != classes:
        raise UserDataError(
            f"{len(names)} class names for {classes} classes: name every class once, in label order"
        )
    for split, y in labels.items():
        if len(y) and int(y.max()) >= classes:
            raise UserDataError(
                f"{describe(split, 'y')} holds label {int(y.max())} in {_rows(y >= classes)} but the dataset has "
                f"{classes} classes (labels 0..{classes - 1}): fix the labels or the class count"
            )
    if classes < 2:
        raise UserDataError(
            f"{describe('train', 'y')}: {classes} class{'es' if classes != 1 else ''}; classification needs at "
            "least 2 (labels 0..K-1)"
        )
    return classes, names


def _image_array(values: Any, describe: Describe, split: str) -> np.ndarray:
    what = describe(split, "x")
    x = _as_array(values, what)
    if x.dtype.kind not in "uif":
        raise UserDataError(
            f"{what} holds {x.dtype} values; images are numbers (uint8 0..255 or floats in [0, 1])"
        )
    if x.ndim == 3:
        x = x[..., None]
    elif x.ndim == 4 and x.shape[1] in (1, 3) and x.shape[-1] not in (1, 3, 4) and x.shape[2] == x.shape[3]:
        x = x.transpose(0, 2, 3, 1)  # (N, C, H, W), unmistakably: to (N, H, W, C)
    elif x.ndim != 4:
        raise UserDataError(
            f"{what} has shape {x.shape} (rank {x.ndim}); images are (N, H, W) grey or (N, H, W, C) with C "
            "channels: reshape the array"
        )
    _, height, width, channels = x.shape
    if height != width:
        raise UserDataError(
            f"{what} holds {height}x{width} images; the models read square images: crop or pad them"
        )
    if not 1 <= channels <= 4:
        raise UserDataError(
            f"{what} has shape {x.shape}: {channels} channels on the last axis; images are (N, H, W) or "
            "(N, H, W, C) with C 1 (grey) or 3 (RGB)"
        )
    return x


def _check_images(
    pairs: Pairs, arrays: ArrayDataset, describe: Describe, feature_names: Sequence[str] | None
) -> Checked:
    images: dict[str, np.ndarray] = {}
    labels: dict[str, np.ndarray] = {}
    for split, (x, y) in pairs.items():
        images[split] = _image_array(x, describe, split)
        labels[split] = _class_labels(y, describe, split)
        _same_length(images[split], labels[split], describe, split)
    shapes = {split: x.shape[1:] for split, x in images.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{describe(s, 'x')}: {'x'.join(map(str, shape))}" for s, shape in shapes.items())
        raise UserDataError(f"the splits hold images of different sizes ({listed}): resize them to one size")
    # One scale for every split's floats: all within [0, 1] are unit pixels, else 0..255 like the integers.
    for split, x in images.items():
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            bad = ~np.isfinite(x).reshape(len(x), -1).all(axis=1)
            raise UserDataError(
                f"{describe(split, 'x')} holds NaN or infinite pixels in {_rows(bad)}: drop or fix those images"
            )
        low, high = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
        if low < 0 or high > 255:
            raise UserDataError(
                f"{describe(split, 'x')} holds pixel values in [{low:g}, {high:g}]; give uint8 0..255 or floats "
                "in [0, 1] (not standardised values: the pixels are standardised from the training split)"
            )
    floats = [x for x in images.values() if x.dtype.kind == "f" and x.size]
    scale = np.float32(255.0 if floats and max(float(x.max()) for x in floats) <= 1.0 else 1.0)
    raw: dict[str, np.ndarray] = {}
    for split, x in images.items():
        raw[f"{split}_x"] = x.astype(np.float32) * scale if x.dtype.kind == "f" else x.astype(np.uint8)
        raw[f"{split}_y"] = labels[split]
    classes, names = _head_size(labels, arrays, describe)
    side, channels = int(images["train"].shape[1]), int(images["train"].shape[3])
    return raw, {"image_side": side, "channels": channels}, classes, names


def _features(values: Any, describe: Describe, split: str, feature_names: Sequence[str] | None) -> np.ndarray:
    what = describe(split, "x")
    x = _as_array(values, what)
    if x.dtype.kind not in "uifb":
        raise UserDataError(
            f"{what} holds {x.dtype} values; features must be numbers (encode categories as numbers)"
        )
    if x.ndim != 2:
        fix = "reshape a single feature to (N, 1)" if x.ndim == 1 else "flatten each example to one row"
        raise UserDataError(f"{what} has shape {x.shape} (rank {x.ndim}); features are (N, F): {fix}")
    x = x.astype(np.float64)
    finite = np.isfinite(x)
    if not finite.all():
        column = int(np.flatnonzero(~finite.all(axis=0))[0])
        named = f"column {feature_names[column]!r}" if feature_names is not None else f"feature {column}"
        raise UserDataError(
            f"{what}: NaN or infinite values in {_rows(~finite.all(axis=1))}, first in {named}; drop or "
            "impute those rows"
        )
    return x


def _target(values: Any, describe: Describe, split: str) -> np.ndarray:
    what = describe(split, "y")
    y = _as_array(values, what)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.dtype.kind not in "uifb" or y.ndim != 1:
        raise UserDataError(
            f"{what} has shape {y.shape} and dtype {y.dtype}; the target is one number per example, (N,)"
        )
    y = y.astype(np.float64)
    if not np.isfinite(y).all():
        raise UserDataError(
            f"{what} holds NaN or infinite targets in {_rows(~np.isfinite(y))}: drop or fix those rows"
        )
    return y


def _check_tabular(
    pairs: Pairs, arrays: ArrayDataset, describe: Describe, feature_names: Sequence[str] | None
) -> Checked:
    raw: dict[str, np.ndarray] = {}
    for split, (x, y) in pairs.items():
        raw[f"{split}_x"] = _features(x, describe, split, feature_names)
        raw[f"{split}_y"] = _target(y, describe, split)
        _same_length(raw[f"{split}_x"], raw[f"{split}_y"], describe, split)
    widths = {split: raw[f"{split}_x"].shape[1] for split in pairs}
    if len(set(widths.values())) > 1:
        listed = ", ".join(f"{describe(s, 'x')}: {w}" for s, w in widths.items())
        raise UserDataError(
            f"the splits have different numbers of features ({listed}): give every split the same columns"
        )
    if widths["train"] < 1:
        raise UserDataError(f"{describe('train', 'x')} has no features: give at least one feature column")
    return raw, {"features": widths["train"]}, None, None


def _sequences(values: Any, what: str, *, tags: bool, names: tuple[str, ...] | None) -> list[list[str]]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise UserDataError(f"{what} must hold one sequence per sentence, got {type(values).__name__}")
    out: list[list[str]] = []
    for row, item in enumerate(values):
        if isinstance(item, str):
            out.append(item.split())
            continue
        if not isinstance(item, (Sequence, np.ndarray)) or isinstance(item, bytes):
            raise UserDataError(
                f"{what}, row {row}: {type(item).__name__}; each sentence is a list of "
                f"{'tags' if tags else 'tokens'} or one space-joined string"
            )
        sentence = []
        for element in item:
            if isinstance(element, (int, np.integer)) and not isinstance(element, bool) and tags:
                if names is not None:
                    if not 0 <= int(element) < len(names):
                        raise UserDataError(
                            f"{what}, row {row}: tag id {int(element)} outside the {len(names)} tag names"
                        )
                    sentence.append(names[int(element)])
                else:
                    sentence.append(str(int(element)))
            elif isinstance(element, str):
                if not element or element.split() != [element]:
                    raise UserDataError(
                        f"{what}, row {row}: the {'tag' if tags else 'token'} {element!r} is empty or holds "
                        "whitespace; split it into tokens"
                    )
                sentence.append(element)
            else:
                raise UserDataError(
                    f"{what}, row {row}: {type(element).__name__} {element!r}; tokens are strings"
                    + (", tags strings or integer tag ids" if tags else "")
                )
        out.append(sentence)
    return out


def _check_tokens(
    pairs: Pairs, arrays: ArrayDataset, describe: Describe, feature_names: Sequence[str] | None
) -> Checked:
    names = tuple(str(n) for n in arrays.class_names) if arrays.class_names is not None else None
    raw: dict[str, np.ndarray] = {}
    words: dict[str, list[list[str]]] = {}
    tags: set[str] = set()
    longest = 0
    for split, (x, y) in pairs.items():
        sentences = _sequences(x, describe(split, "x"), tags=False, names=None)
        tag_lines = _sequences(y, describe(split, "y"), tags=True, names=names)
        _same_length(sentences, tag_lines, describe, split)
        for row, (sentence, line) in enumerate(zip(sentences, tag_lines, strict=True)):
            if not sentence:
                raise UserDataError(f"{describe(split, 'x')}, row {row}: an empty sentence; drop it")
            if len(sentence) != len(line):
                raise UserDataError(
                    f"{describe(split, 'x')}, row {row} has {len(sentence)} tokens but {describe(split, 'y')} has "
                    f"{len(line)} tags: give one tag per token"
                )
            longest = max(longest, len(sentence))
            tags.update(line)
        words[split] = sentences
        raw[f"{split}_x"] = np.array([" ".join(s) for s in sentences], dtype=str)
        raw[f"{split}_y"] = np.array([" ".join(t) for t in tag_lines], dtype=str)
    if len(tags) < 2:
        raise UserDataError(
            f"{describe('train', 'y')}: {len(tags)} distinct tag(s); token classification needs at least 2"
        )
    # The vocabulary is built on the training split: exact where the file gives every split, else the words
    # of the pool the splits are carved from (an upper bound whatever the split seed).
    vocab = len({w for sentence in words["train"] for w in sentence} - _RESERVED_TOKENS) + 2
    exact = "val" in pairs and "test" in pairs
    facts = {"vocab_size": vocab, "vocabulary_exact": exact, "tags": len(tags), "longest_sentence": longest}
    return raw, facts, len(tags), tuple(sorted(tags))


# --- building -------------------------------------------------------------------------------------------
def _fits_the_record(record: Dataset, task: str, where: str) -> None:
    if record.task != task:
        raise UserDataError(
            f"{where} is registered with task {record.task!r} but its data is for {task!r}: register it with "
            f"task={task!r}, metric={TASK_METRIC[task]!r}"
        )
    if record.family != TASK_FAMILY[task]:
        raise UserDataError(
            f"{where} is registered as {record.family} data but {task} reads {TASK_FAMILY[task]} data: register "
            f"it with family={TASK_FAMILY[task]!r}"
        )
    if record.metric != TASK_METRIC[task]:
        raise UserDataError(
            f"{where} is registered with metric {record.metric!r}, which does not fit {task}: use "
            f"metric={TASK_METRIC[task]!r}" + (", higher_is_better=False" if task == "regression" else "")
        )
    if record.higher_is_better != (task != "regression"):
        raise UserDataError(
            f"{where}: {record.metric} is {'lower' if task == 'regression' else 'higher'}-is-better; register it "
            f"with higher_is_better={task != 'regression'}"
        )


def bundle_from_record(
    record: Dataset,
    arrays: ArrayDataset | CheckedArrays,
    *,
    split_seed: int,
    source: str,
    describe: Describe | None = None,
    where: str | None = None,
) -> DatasetBundle:
    """Ready tensors of the dataset `record` describes, from its arrays (checked here unless they were).

    The missing splits are carved by the arrays' own split seed where they fix one, else `split_seed`."""
    from workers.data import builders
    from workers.data.bundle import DatasetBundle

    where = where or f"dataset {record.name!r} ({record.source})"
    if isinstance(arrays, ArrayDataset):
        if arrays.classes is None and record.classes is not None and arrays.task != "token_classification":
            arrays = replace(arrays, classes=record.classes)
        checked = check_arrays(arrays, name=record.name, describe=describe, where=where)
    else:
        checked = arrays
    _fits_the_record(record, checked.task, where)
    seed = int(split_seed if checked.split_seed is None else checked.split_seed)
    plan = builders.plan_splits(
        checked.raw, split_seed=seed, val_fraction=checked.val_fraction, test_fraction=checked.test_fraction
    )
    class_names = checked.class_names
    if checked.task == "image_classification":
        assert checked.classes is not None
        built = builders.build_image(checked.raw, plan, num_classes=checked.classes)
    elif checked.task == "regression":
        built = builders.build_regression(checked.raw, plan)
    else:
        assert checked.max_len is not None
        built = builders.build_token_classification(checked.raw, plan, max_len=checked.max_len)
        class_names = built.class_names
    return DatasetBundle(
        name=record.name,
        task=checked.task,  # type: ignore[arg-type]
        metric=record.metric,  # type: ignore[arg-type]
        higher_is_better=record.higher_is_better,
        train=built.splits["train"],
        val=built.splits["val"],
        test=built.splits["test"],
        eval_sets={},
        model_fields=built.model_fields,
        # The record's, else its family's backbone: the model spec validation and sizing assume too.
        default_model=record.default_model or FAMILY_BACKBONE[record.family],
        target_std=built.target_std,
        stand_in_for=record.stand_in_for,
        split_seed=seed,
        source=source,
        split_indices=plan.indices,
        pools=plan.pools,
        class_names=class_names,
        vocab=built.vocab,
        pixel_mean=built.pixel_mean,
        pixel_std=built.pixel_std,
    )
