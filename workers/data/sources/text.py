"""Text sources: the WSJ sample in python3-pattern, the Rotten Tomatoes sentences in vaderSentiment's
resources, and the Hub (SST-2, POS tagging, PTB language modelling).

Text is returned as str arrays: one sentence per entry, tokens joined by single spaces where the source is
pre-tokenised; tag sequences the same way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.data.locations import offline_dir
from workers.data.resolve import RawArrays
from workers.data.sources import hub

__all__ = [
    "load_hub_lm",
    "load_hub_pos",
    "load_hub_sst2",
    "load_rotten_tomatoes_vader",
    "load_wsj_sample_lm",
    "load_wsj_sample_pos",
    "rotten_tomatoes_path",
    "wsj_sample_path",
]

_WSJ_RELATIVE = Path("pattern/usr/share/doc/python3-pattern/test/corpora/tagged-en-wsj.txt")
_VADER_RELATIVE = Path("vader/hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt")


def wsj_sample_path() -> Path:
    """The ~1,000-sentence Penn Treebank WSJ sample (licence: personal use, read at run time only)."""
    return offline_dir() / _WSJ_RELATIVE


def rotten_tomatoes_path() -> Path:
    return offline_dir() / _VADER_RELATIVE


def _read_wsj_sample() -> tuple[list[str], list[str]] | None:
    path = wsj_sample_path()
    if not path.is_file():
        return None
    sentences, tag_lines = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        pairs = line.split()
        if not pairs:
            continue
        # Words may contain "/" (escaped as "\/" in the treebank): the tag is after the LAST slash.
        words, tags = zip(*(pair.rsplit("/", 1) for pair in pairs), strict=True)
        sentences.append(" ".join(words))
        tag_lines.append(" ".join(tags))
    return sentences, tag_lines


def load_wsj_sample_pos() -> RawArrays | None:
    read = _read_wsj_sample()
    if read is None:
        return None
    sentences, tag_lines = read
    return {"train_x": np.asarray(sentences, dtype=str), "train_y": np.asarray(tag_lines, dtype=str)}


def load_wsj_sample_lm() -> RawArrays | None:
    read = _read_wsj_sample()
    if read is None:
        return None
    return {"train_x": np.asarray(read[0], dtype=str)}


def load_rotten_tomatoes_vader() -> RawArrays | None:
    """10,605 Rotten Tomatoes snippets with mean human sentiment in [-4, 4], binarised: > 0 positive.

    The 37 snippets rated exactly 0 are dropped (SST-2 likewise drops neutral sentences), leaving 10,568.
    """
    path = rotten_tomatoes_path()
    if not path.is_file():
        return None
    sentences, labels = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        _, score, sentence = line.split("\t", 2)
        value = float(score)
        if value == 0.0:
            continue
        sentences.append(sentence.strip())
        labels.append(int(value > 0))
    return {"train_x": np.asarray(sentences, dtype=str), "train_y": np.asarray(labels, dtype=np.int64)}


def load_hub_sst2() -> RawArrays:
    """GLUE SST-2: the test labels are hidden (-1), so the official validation split is our test set."""
    splits = hub.load_hub("stanfordnlp/sst2")
    return {
        "train_x": hub.texts(splits["train"], "sentence"),
        "train_y": np.asarray(splits["train"]["label"], dtype=np.int64),
        "test_x": hub.texts(splits["validation"], "sentence"),
        "test_y": np.asarray(splits["validation"]["label"], dtype=np.int64),
    }


def load_hub_pos(path: str = "batterydata/pos_tagging") -> RawArrays:
    """A Penn-tagset POS corpus with official train/test splits."""
    splits = hub.load_hub(path)
    arrays: RawArrays = {}
    for split in ("train", "test"):
        tokens, tags = hub.token_sequences(splits[split], ("words", "tokens"), ("labels", "pos_tags", "tags"))
        arrays[f"{split}_x"], arrays[f"{split}_y"] = tokens, tags
    return arrays


def load_hub_lm(path: str = "ptb-text-only/ptb_text_only") -> RawArrays:
    """Mikolov's PTB language-modelling text (WSJ, 10k vocabulary) with its official three splits."""
    splits = hub.load_hub(path)
    return {
        "train_x": hub.texts(splits["train"], "sentence"),
        "val_x": hub.texts(splits["validation"], "sentence"),
        "test_x": hub.texts(splits["test"], "sentence"),
    }
