"""Split carving and text encoding, the pieces every dataset builder relies on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers.data.bundle import IGNORE_INDEX
from workers.data.splits import carve_splits
from workers.data.vocab import PAD_ID, UNK_ID, Vocabulary, encode_lm_stream, encode_padded, tokenize


@given(n=st.integers(20, 3000), seed=st.integers(0, 2**31 - 1))
def test_carved_splits_partition_the_pool(n: int, seed: int) -> None:
    splits = carve_splits(n, split_seed=seed, val_fraction=0.1, test_fraction=0.1)
    joined = np.concatenate([splits["train"], splits["val"], splits["test"]])
    assert sorted(joined.tolist()) == list(range(n))
    assert len(splits["val"]) == max(1, round(n * 0.1))


def test_carving_depends_on_split_seed_only() -> None:
    a = carve_splits(1000, split_seed=7, val_fraction=0.2)
    b = carve_splits(1000, split_seed=7, val_fraction=0.2)
    c = carve_splits(1000, split_seed=8, val_fraction=0.2)
    np.testing.assert_array_equal(a["val"], b["val"])
    assert not np.array_equal(a["val"], c["val"])
    assert "test" not in a  # an official test set exists: only validation is carved


def test_impossible_fractions_are_rejected() -> None:
    with pytest.raises(ValueError, match="fractions"):
        carve_splits(100, split_seed=0, val_fraction=0.6, test_fraction=0.5)
    with pytest.raises(ValueError, match="too small"):
        carve_splits(2, split_seed=0, val_fraction=0.4, test_fraction=0.4)


def test_vocabulary_reserves_pad_and_unk_and_ranks_by_training_frequency() -> None:
    vocab = Vocabulary.build([["b", "a", "b"], ["c", "b", "a"]])
    assert vocab.tokens == ("<pad>", "<unk>", "b", "a", "c")
    assert vocab.ids(["a", "zebra"]) == [3, UNK_ID]
    assert len(Vocabulary.build([["b", "a", "b"], ["c"]], max_size=3)) == 3


def test_padding_truncates_long_and_fills_short_sequences() -> None:
    out = encode_padded([[5, 6, 7, 8], [9]], 3)
    assert out.tolist() == [[5, 6, 7], [9, PAD_ID, PAD_ID]]
    assert encode_padded([[1]], 2, fill=IGNORE_INDEX).tolist() == [[1, IGNORE_INDEX]]


def test_language_model_blocks_shift_targets_and_keep_every_token() -> None:
    x, y = encode_lm_stream([[10, 11], [12]], eos_id=2, block=2)  # stream 10 11 2 12 2
    assert x.tolist() == [[10, 11], [2, 12]]
    assert y.tolist() == [[11, 2], [12, 2]]
    x, y = encode_lm_stream([[10, 11, 12], [13]], eos_id=2, block=3)  # 5 targets -> 2 blocks, last padded
    assert x.tolist() == [[10, 11, 12], [2, 13, PAD_ID]]
    assert y.tolist() == [[11, 12, 2], [13, 2, IGNORE_INDEX]]


def test_tokenizer_splits_words_and_punctuation_and_respects_pretokenised_text() -> None:
    assert tokenize("It's a witty, GORGEOUS film!", lowercase=True, pretokenized=False) == [
        "it's", "a", "witty", ",", "gorgeous", "film", "!",
    ]  # fmt: skip
    assert tokenize("Mr. Vinken is chairman", lowercase=False, pretokenized=True) == [
        "Mr.",
        "Vinken",
        "is",
        "chairman",
    ]
