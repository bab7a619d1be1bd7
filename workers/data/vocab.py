"""Word-level vocabulary built from the training split, and encoding to fixed-length id tensors."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from workers.data.bundle import IGNORE_INDEX

__all__ = [
    "EOS",
    "PAD",
    "PAD_ID",
    "UNK",
    "UNK_ID",
    "Vocabulary",
    "encode_lm_stream",
    "encode_padded",
    "tokenize",
]

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"
PAD_ID, UNK_ID = 0, 1

_WORD_PATTERN = re.compile(r"[a-z0-9]+(?:['\-][a-z0-9]+)*|'[a-z]+|[^\sa-z0-9]")


def tokenize(text: str, *, lowercase: bool, pretokenized: bool) -> list[str]:
    """Whitespace split for pre-tokenised corpora (treebank text); a lowercase word/punctuation regex otherwise."""
    if pretokenized:
        return (text.lower() if lowercase else text).split()
    return _WORD_PATTERN.findall(text.lower())


@dataclass(frozen=True)
class Vocabulary:
    """Token <-> id. Id 0 is padding and id 1 unknown; the rest by training frequency (ties alphabetical)."""

    tokens: tuple[str, ...]

    @classmethod
    def build(
        cls, sentences: Iterable[Sequence[str]], *, min_freq: int = 1, max_size: int | None = None
    ) -> Vocabulary:
        counts = Counter(token for sentence in sentences for token in sentence)
        counts.pop(PAD, None)
        counts.pop(UNK, None)
        ranked = sorted(
            (token for token, count in counts.items() if count >= min_freq), key=lambda t: (-counts[t], t)
        )
        if max_size is not None:
            ranked = ranked[: max(0, max_size - 2)]
        return cls((PAD, UNK, *ranked))

    def __len__(self) -> int:
        return len(self.tokens)

    def ids(self, sentence: Sequence[str]) -> list[int]:
        index = self._index
        return [index.get(token, UNK_ID) for token in sentence]

    @property
    def _index(self) -> dict[str, int]:
        cached = self.__dict__.get("_index_cache")
        if cached is None:
            cached = {token: i for i, token in enumerate(self.tokens)}
            object.__setattr__(self, "_index_cache", cached)
        return cached


def encode_padded(sequences: Sequence[Sequence[int]], max_len: int, *, fill: int = PAD_ID) -> np.ndarray:
    """(N, max_len) int64: each sequence truncated to max_len, right-padded with `fill`."""
    out = np.full((len(sequences), max_len), fill, dtype=np.int64)
    for row, sequence in enumerate(sequences):
        clipped = sequence[:max_len]
        out[row, : len(clipped)] = clipped
    return out


def encode_lm_stream(
    sentences: Sequence[Sequence[int]], eos_id: int, block: int
) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate sentences (each followed by <eos>) and cut into next-token blocks.

    Returns x, y of shape (B, block): y is x shifted by one. The last partial block is padded (x with
    PAD_ID, y with IGNORE_INDEX) so no token of the split is dropped from the perplexity.
    """
    stream = np.fromiter((i for sentence in sentences for i in (*sentence, eos_id)), dtype=np.int64)
    n_targets = len(stream) - 1
    n_blocks = max(1, -(-n_targets // block))
    x = np.full((n_blocks, block), PAD_ID, dtype=np.int64)
    y = np.full((n_blocks, block), IGNORE_INDEX, dtype=np.int64)
    x.reshape(-1)[:n_targets] = stream[:-1]
    y.reshape(-1)[:n_targets] = stream[1:]
    return x, y
