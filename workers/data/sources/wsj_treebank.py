"""The Penn Treebank-3 WSJ part-of-speech corpus (LDC99T42), read from the user's own licensed copy.

The LDC licence forbids redistribution, so nothing here downloads or installs it: $NORMLAB_PTB_WSJ_DIR
names a copy, either the treebank's root or any folder under it. Two of its formats are read:

- parse trees, wsj_NNNN.mrg (Treebank-3 parsed/mrg/wsj/NN/, Treebank-2 combined/wsj/NN/): a word's tag is
  its preterminal; the empty elements (-NONE-: traces, null complementisers) are no words and are dropped;
- tagged text, wsj_NNNN.pos (tagged/pos/wsj/NN/): word/TAG tokens, NP chunks in [ ], paragraphs between
  ====== lines; a sentence ends at a blank line or a separator.

When a copy holds both, the trees are read: the standard tagging results (Collins 2002, Manning 2011) come
from them. The split is theirs too, by section (NN in wsj_NNxx): 00-18 train, 19-21 validation, 22-24 test.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np

from workers.data.errors import DataUnavailableError
from workers.data.locations import PTB_WSJ_DIR_ENV, ptb_wsj_dir
from workers.data.resolve import RawArrays

__all__ = [
    "LDC_CATALOG",
    "SECTION_SPLITS",
    "TaggedSentence",
    "load_wsj_pos",
    "missing_wsj_message",
    "read_mrg_sentences",
    "read_pos_sentences",
    "treebank_files",
]

LDC_CATALOG = "LDC99T42"
SECTION_SPLITS: dict[str, range] = {"train": range(0, 19), "val": range(19, 22), "test": range(22, 25)}

# (word, tag) pairs of one sentence.
TaggedSentence = list[tuple[str, str]]

_FILE_NAME = re.compile(r"wsj_(\d\d)\d\d\.(mrg|pos)")
_FORMATS = ("mrg", "pos")  # in order of preference
_SEPARATOR = re.compile(r"=====+\s*$")
_TREE_TOKEN = re.compile(r"[()]|[^\s()]+")
_EMPTY_ELEMENT = "-NONE-"
# The .pos files tag round brackets "(" and ")", the trees -LRB- and -RRB-: one label set whichever is read.
_BRACKET_TAGS = {"(": "-LRB-", ")": "-RRB-"}
_LAYOUT = (
    "the treebank's root or any folder under it holding parsed/mrg/wsj/NN/wsj_NNNN.mrg (Treebank-3) or "
    "combined/wsj/NN/wsj_NNNN.mrg (Treebank-2) parse trees, or tagged/pos/wsj/NN/wsj_NNNN.pos tagged text"
)


def _tag(raw: str) -> str:
    # Where the annotators could not decide, a token carries two tags (VBN|JJ); the first is kept so the
    # label space stays the Penn tag set.
    first = raw.split("|", 1)[0]
    return _BRACKET_TAGS.get(first, first)


def read_mrg_sentences(text: str) -> list[TaggedSentence]:
    """The tagged words of each tree in a .mrg file, in order, without empty elements."""
    tokens = _TREE_TOKEN.findall(text)
    sentences: list[TaggedSentence] = []
    current: TaggedSentence = []
    depth = 0
    for i, token in enumerate(tokens):
        if token == "(":
            depth += 1
            leaf = _preterminal(tokens, i)
            if leaf is not None and leaf[1] != _EMPTY_ELEMENT:
                current.append((leaf[0], _tag(leaf[1])))
        elif token == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ')'")
            if depth == 0 and current:  # a top-level tree closed: one sentence
                sentences.append(current)
                current = []
    if depth != 0:
        raise ValueError("unbalanced '(': the last tree is not closed")
    return sentences


def _preterminal(tokens: list[str], i: int) -> tuple[str, str] | None:
    """(word, tag) when tokens[i:i + 4] is `( TAG word )`, the only place a word occurs in a tree."""
    window = tokens[i : i + 4]
    if len(window) == 4 and window[3] == ")" and "(" not in window[1:3] and ")" not in window[1:3]:
        return window[2], window[1]
    return None


def read_pos_sentences(text: str) -> list[TaggedSentence]:
    """The tagged words of each sentence in a .pos file; chunk brackets are dropped."""
    sentences: list[TaggedSentence] = []
    current: TaggedSentence = []
    for line in text.splitlines():
        if not line.strip() or _SEPARATOR.match(line):
            if current:
                sentences.append(current)
                current = []
            continue
        current.extend(_pos_token(token) for token in line.split() if token not in ("[", "]"))
    if current:
        sentences.append(current)
    return sentences


def _pos_token(token: str) -> tuple[str, str]:
    # A slash inside a word is escaped (1\/2/CD): the tag follows the LAST slash.
    word, slash, tag = token.rpartition("/")
    if not slash or not word or not tag:
        raise ValueError(f"token {token!r} is not word/TAG")
    return word, _tag(tag)


def treebank_files(root: Path) -> list[Path]:
    """The copy's wsj_NNNN files of the preferred format present, sorted by name; [] when there are none."""
    for suffix in _FORMATS:
        files = sorted(
            (p for p in root.rglob(f"wsj_*.{suffix}") if _FILE_NAME.fullmatch(p.name)), key=lambda p: p.name
        )
        if files:
            _refuse_two_copies(root, files)
            return files
    return []


def _refuse_two_copies(root: Path, files: list[Path]) -> None:
    # Reading a file twice would put its sentences in a split twice; which copy is meant is the user's call.
    for first, second in itertools.pairwise(files):
        if first.name == second.name:
            raise DataUnavailableError(
                f"dataset 'ptb_wsj_pos': {PTB_WSJ_DIR_ENV}={root} holds two copies of {first.name} "
                f"({first} and {second}); point {PTB_WSJ_DIR_ENV} at one copy of the treebank"
            )


def _section(path: Path) -> int:
    match = _FILE_NAME.fullmatch(path.name)
    assert match is not None  # treebank_files keeps matching names only
    return int(match.group(1))


def _read_file(path: Path) -> list[TaggedSentence]:
    # latin-1 decodes any byte: the treebank is ASCII, and a stray byte must not stop a 49k-sentence read.
    text = path.read_text(encoding="latin-1")
    try:
        return read_mrg_sentences(text) if path.suffix == ".mrg" else read_pos_sentences(text)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def missing_wsj_message() -> str:
    """What the user must supply, starting with what is wrong with $NORMLAB_PTB_WSJ_DIR now."""
    root = ptb_wsj_dir()
    if root is None:
        state = f"{PTB_WSJ_DIR_ENV} is not set"
    elif not root.is_dir():
        state = f"{PTB_WSJ_DIR_ENV}={root} is not a directory"
    else:
        state = f"{PTB_WSJ_DIR_ENV}={root} holds no wsj_NNNN.mrg or wsj_NNNN.pos files"
    return (
        f"{state}. The Penn Treebank-3 WSJ corpus is licensed by the LDC (catalogue {LDC_CATALOG}, "
        f"https://catalog.ldc.upenn.edu/{LDC_CATALOG}) and is never downloaded: set {PTB_WSJ_DIR_ENV} to "
        f"your own copy, {_LAYOUT}. Sections 00-18 train, 19-21 validate, 22-24 test. Without a copy, a "
        "spec may name a stand-in, reported as one: ptb_pos (downloaded, Penn tags, not the WSJ) or "
        "ptb_pos_sample (a ~1,000-sentence WSJ sample, offline)"
    )


def load_wsj_pos() -> RawArrays | None:
    """Sentences and tags of the user's copy split by section; None when $NORMLAB_PTB_WSJ_DIR holds none."""
    root = ptb_wsj_dir()
    if root is None or not root.is_dir():
        return None
    files = treebank_files(root)
    if not files:
        return None
    by_split: dict[str, list[TaggedSentence]] = {split: [] for split in SECTION_SPLITS}
    for path in files:
        split = next((s for s, sections in SECTION_SPLITS.items() if _section(path) in sections), None)
        if split is not None:  # the WSJ has sections 00-24 only
            by_split[split].extend(_read_file(path))
    empty = [split for split, sentences in by_split.items() if not sentences]
    if empty:
        raise DataUnavailableError(
            f"dataset 'ptb_wsj_pos': {PTB_WSJ_DIR_ENV}={root} has {len(files)} treebank files but no "
            f"sentences for the {', '.join(_describe(split) for split in empty)}; a copy needs sections "
            "00-24 (00-18 train, 19-21 validation, 22-24 test)"
        )
    return _arrays(by_split)


def _describe(split: str) -> str:
    sections = SECTION_SPLITS[split]
    return f"{split} split (sections {sections[0]:02d}-{sections[-1]:02d})"


def _arrays(by_split: dict[str, list[TaggedSentence]]) -> RawArrays:
    arrays: RawArrays = {}
    for split, sentences in by_split.items():
        arrays[f"{split}_x"] = np.asarray([" ".join(w for w, _ in s) for s in sentences], dtype=str)
        arrays[f"{split}_y"] = np.asarray([" ".join(t for _, t in s) for s in sentences], dtype=str)
    return arrays
