"""The paper's WSJ POS data (ptb_wsj_pos) is read only from the user's own LDC copy, in either of the
treebank's formats, split by section; without a copy the error says how to supply one, and nothing is
downloaded or substituted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from studies.catalog import load_catalog_spec
from studies.catalog.datasets import dataset_comparability
from workers.data import DATASETS, DataUnavailableError, get_dataset
from workers.data.bundle import IGNORE_INDEX
from workers.data.catalog import REGISTRY
from workers.data.sources.wsj_treebank import load_wsj_pos, read_mrg_sentences, read_pos_sentences

ENV = "NORMLAB_PTB_WSJ_DIR"

# Two trees of section 00 as Treebank-3 writes them: traces and a null complementiser (-NONE-) to drop.
MRG_00 = """( (S
    (NP-SBJ (NNP Pierre) (NNP Vinken) )
    (VP (MD will)
      (VP (VB join)
        (NP (DT the) (NN board) )))
    (. .) ))
( (S
    (NP-SBJ-1 (PRP He) )
    (VP (VBD said)
      (SBAR (-NONE- 0)
        (S (NP-SBJ (-NONE- *-1) )
          (VP (TO to) (VP (VB go) (-LRB- -LRB-) (CD 1\\/2) (-RRB- -RRB-) )))))
    (. .) ))
"""
MRG_19 = "( (S (NP-SBJ (PRP It) ) (VP (VBZ rains) ) (. .) ))\n"
MRG_22 = "( (S (NP-SBJ (NNS Stocks) ) (VP (VBD fell) ) (. .) ))\n"

# The same kind of text as tagged/pos/wsj writes it: NP chunks in [ ], ====== between paragraphs, blank
# lines between sentences; an escaped slash, an ambiguous tag and a bracket tagged "(".
POS_00 = """
======================================

[ Pierre/NNP Vinken/NNP ]
will/MD join/VB
[ the/DT board/NN ]
./.

[ 1\\/2/CD ]
(/( rose/VBN|JJ )/) ./.

======================================

[ He/PRP ]
left/VBD ./.
"""
POS_19 = "\n======================================\n\n[ It/PRP ]\nrains/VBZ ./.\n"
POS_22 = "\n======================================\n\n[ Stocks/NNS ]\nfell/VBD ./.\n"


def _write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="ascii")
    return root


@pytest.fixture
def mrg_copy(tmp_path: Path) -> Path:
    """A fake Treebank-3 root: parse trees in parsed/mrg/wsj/NN/ for sections 00, 19 and 22."""
    return _write(
        tmp_path / "treebank_3",
        {
            "parsed/mrg/wsj/00/wsj_0001.mrg": MRG_00,
            "parsed/mrg/wsj/00/wsj_0002.mrg": MRG_19.replace("rains", "shines"),
            "parsed/mrg/wsj/19/wsj_1901.mrg": MRG_19,
            "parsed/mrg/wsj/22/wsj_2201.mrg": MRG_22,
        },
    )


@pytest.fixture
def pos_copy(tmp_path: Path) -> Path:
    """A fake copy holding only the tagged text, tagged/pos/wsj/NN/, for sections 00, 19 and 22."""
    return _write(
        tmp_path / "tagged_only",
        {
            "tagged/pos/wsj/00/wsj_0001.pos": POS_00,
            "tagged/pos/wsj/19/wsj_1901.pos": POS_19,
            "tagged/pos/wsj/22/wsj_2201.pos": POS_22,
        },
    )


@pytest.fixture
def no_copy(monkeypatch: pytest.MonkeyPatch, empty_cache: Path) -> None:
    monkeypatch.delenv(ENV, raising=False)


def test_trees_give_each_words_preterminal_and_drop_the_empty_elements() -> None:
    first, second = read_mrg_sentences(MRG_00)
    assert first == [
        ("Pierre", "NNP"),
        ("Vinken", "NNP"),
        ("will", "MD"),
        ("join", "VB"),
        ("the", "DT"),
        ("board", "NN"),
        (".", "."),
    ]
    words = [word for word, _ in second]
    assert words == ["He", "said", "to", "go", "-LRB-", "1\\/2", "-RRB-", "."]
    assert "-NONE-" not in {tag for _, tag in second}


def test_an_unbalanced_tree_is_refused() -> None:
    with pytest.raises(ValueError, match="not closed"):
        read_mrg_sentences("( (S (NN a) )")


def test_tagged_text_drops_chunk_brackets_and_splits_at_blank_lines_and_separators() -> None:
    sentences = read_pos_sentences(POS_00)
    assert [" ".join(w for w, _ in s) for s in sentences] == [
        "Pierre Vinken will join the board .",
        "1\\/2 ( rose ) .",
        "He left .",
    ]
    # the tag after the last slash; the first of two ambiguous tags; the trees' names for bracket tags
    assert sentences[1] == [("1\\/2", "CD"), ("(", "-LRB-"), ("rose", "VBN"), (")", "-RRB-"), (".", ".")]
    with pytest.raises(ValueError, match="word/TAG"):
        read_pos_sentences("[ board ]\n")


def test_sections_make_the_standard_split(mrg_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(mrg_copy))
    raw = load_wsj_pos()
    assert raw is not None
    # section 00 (its two files in name order) trains, 19 validates, 22 tests
    assert list(raw["train_x"]) == [
        "Pierre Vinken will join the board .",
        "He said to go -LRB- 1\\/2 -RRB- .",
        "It shines .",
    ]
    assert raw["train_y"][1] == "PRP VBD TO VB -LRB- CD -RRB- ."
    assert list(raw["val_x"]) == ["It rains ."] and list(raw["val_y"]) == ["PRP VBZ ."]
    assert list(raw["test_x"]) == ["Stocks fell ."] and list(raw["test_y"]) == ["NNS VBD ."]


def test_the_copys_root_or_any_folder_under_it_will_do(
    mrg_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in (mrg_copy, mrg_copy / "parsed" / "mrg" / "wsj"):
        monkeypatch.setenv(ENV, str(folder))
        raw = load_wsj_pos()
        assert raw is not None and len(raw["train_x"]) == 3


def test_tagged_text_is_read_when_there_are_no_trees(pos_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(pos_copy))
    raw = load_wsj_pos()
    assert raw is not None
    assert len(raw["train_x"]) == 3 and list(raw["val_x"]) == ["It rains ."]
    assert list(raw["test_y"]) == ["NNS VBD ."]


def test_trees_win_over_tagged_text_in_a_copy_with_both(
    mrg_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(mrg_copy, {"tagged/pos/wsj/22/wsj_2201.pos": POS_22.replace("Stocks", "Bonds")})
    monkeypatch.setenv(ENV, str(mrg_copy))
    raw = load_wsj_pos()
    assert raw is not None and list(raw["test_x"]) == ["Stocks fell ."]


def test_the_registry_builds_a_token_classification_bundle_of_the_papers_data(
    mrg_copy: Path, monkeypatch: pytest.MonkeyPatch, empty_cache: Path
) -> None:
    monkeypatch.setenv(ENV, str(mrg_copy))
    bundle = get_dataset("ptb_wsj_pos", download=False)
    assert bundle.sizes() == {"train": 3, "val": 1, "test": 1}
    assert bundle.pools == {"train": "train", "val": "val", "test": "test"}  # the sections, not a carve
    assert bundle.stand_in_for is None and bundle.default_model == "encoder_paper"
    assert bundle.source.startswith("offline:") and "LDC99T42" in bundle.source
    assert bundle.class_names is not None and bundle.vocab is not None
    assert bundle.model_fields == {
        "vocab_size": len(bundle.vocab),
        "max_len": 128,
        "num_classes": len(bundle.class_names),
        "head": "token",
        "pad_id": 0,
    }
    assert {"NNP", "-LRB-", "-RRB-"} <= set(bundle.class_names) and "-NONE-" not in bundle.class_names
    x, y = bundle.test.tensors  # (1, 128) each: "Stocks fell ." then padding
    assert [bundle.class_names[i] for i in y[0, :3]] == ["NNS", "VBD", "."]
    assert bool((y[0, 3:] == IGNORE_INDEX).all()) and tuple(x.shape) == (1, 128)
    # the licence allows no copy of the data outside the user's own: nothing lands in the cache
    assert not list(empty_cache.rglob("*.npz"))


def test_without_the_variable_the_error_names_it_the_ldc_number_and_the_layout(no_copy: None) -> None:
    for download in (True, False):  # there is nothing to download, whatever the caller allows
        with pytest.raises(DataUnavailableError) as raised:
            get_dataset("ptb_wsj_pos", download=download)
        message = str(raised.value)
        assert f"{ENV} is not set" in message
        assert "LDC99T42" in message and "never downloaded" in message
        for layout in ("parsed/mrg/wsj/NN/wsj_NNNN.mrg", "combined/wsj/NN", "tagged/pos/wsj/NN/wsj_NNNN.pos"):
            assert layout in message
        assert "00-18 train, 19-21 validate, 22-24 test" in message
        assert "make data-offline" not in message  # no installer can fetch licensed data


def test_a_folder_without_treebank_files_is_named_in_the_error(
    no_copy: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(ENV, str(empty))
    with pytest.raises(
        DataUnavailableError, match=re.escape(f"{ENV}={empty} holds no wsj_NNNN.mrg or wsj_NNNN.pos")
    ):
        get_dataset("ptb_wsj_pos")
    monkeypatch.setenv(ENV, str(tmp_path / "missing"))
    with pytest.raises(DataUnavailableError, match="is not a directory"):
        get_dataset("ptb_wsj_pos")


def test_a_copy_missing_the_test_sections_says_which(
    no_copy: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partial = _write(tmp_path / "partial", {"00/wsj_0001.mrg": MRG_00, "19/wsj_1901.mrg": MRG_19})
    monkeypatch.setenv(ENV, str(partial))
    with pytest.raises(DataUnavailableError, match=r"test split \(sections 22-24\)"):
        get_dataset("ptb_wsj_pos")


def test_two_copies_of_a_file_are_refused(
    mrg_copy: Path, monkeypatch: pytest.MonkeyPatch, empty_cache: Path
) -> None:
    _write(mrg_copy, {"combined/wsj/22/wsj_2201.mrg": MRG_22})
    monkeypatch.setenv(ENV, str(mrg_copy))
    with pytest.raises(DataUnavailableError, match=re.escape("two copies of wsj_2201.mrg")):
        get_dataset("ptb_wsj_pos")


def test_it_is_the_papers_dataset_and_its_stand_ins_point_at_it() -> None:
    source = REGISTRY["ptb_wsj_pos"].source
    assert source.download is None and len(source.offline) == 1  # the user's copy, nothing else
    info = DATASETS["ptb_wsj_pos"]
    assert (info.task, info.metric, info.stand_in_for, info.stand_in_note) == (
        "token_classification",
        "accuracy",
        None,
        None,
    )
    for stand_in in ("ptb_pos", "ptb_pos_sample"):
        assert DATASETS[stand_in].stand_in_for == "ptb_wsj_pos"
        assert "LDC99T42" in (DATASETS[stand_in].stand_in_note or "")


def test_the_pos_claims_paper_spec_runs_on_the_papers_data() -> None:
    spec = load_catalog_spec("ptb_pos_autonorm_s_beats_frozen_ln", "paper")
    assert spec.dataset == "ptb_wsj_pos"
    comparability = dataset_comparability(spec.dataset, "ptb_wsj_pos")
    assert comparability.comparable and not comparability.is_stand_in
    assert not dataset_comparability("ptb_pos_sample", "ptb_wsj_pos").comparable
