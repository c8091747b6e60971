"""Tokenisation: word-level and WordPiece tokenizers, save/load, encode, the word-link rule."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from syntaxformer.data.tokenization import (
    SPECIAL_TOKENS,
    build_word_tokenizer,
    build_wordpiece_tokenizer,
    encode,
    save_tokenizer,
    word_links,
)
from syntaxformer.errors import InputError


@pytest.fixture(scope="module")
def ptb_sample_words(ptb_gold):
    """The words of the preprocessed embedded ptb-sample (3,914 sentences)."""
    return [tree.leaves() for tree in ptb_gold]


CORPUS = [["the", "cat", "sat"], ["the", "dog", "sat", "down"], ["a", "cat", "<unk>"], ["the", "end"]]


def test_word_tokenizer_vocabulary_and_special_ids():
    tok = build_word_tokenizer(CORPUS)
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert (tok.pad_token_id, tok.unk_token_id, tok.mask_token_id, tok.cls_token_id) == (0, 1, 2, 3)
    # most frequent first, ties alphabetical; <unk> is not a word
    vocab = tok.get_vocab()
    assert vocab["the"] == 4 and vocab["cat"] == 5 and vocab["sat"] == 6
    assert [w for w, _ in sorted(vocab.items(), key=lambda x: x[1])][7:] == ["a", "dog", "down", "end"]
    assert "<unk>" not in vocab and len(tok) == 11
    # min_freq / max_vocab
    assert len(build_word_tokenizer(CORPUS, min_freq=2)) == 4 + 3
    assert len(build_word_tokenizer(CORPUS, max_vocab=6)) == 6


def test_word_tokenizer_round_trip_and_autotokenizer(tmp_path):
    tok = build_word_tokenizer(CORPUS, min_freq=1)
    ids, wids = encode(tok, [["the", "cat", "zebra", "<unk>", "sat"]])
    assert ids == [[4, 5, 1, 1, 6]] and wids == [[0, 1, 2, 3, 4]]
    assert tok.decode(ids[0]) == "the cat [UNK] [UNK] sat"
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.is_fast and loaded.get_vocab() == tok.get_vocab()
    assert encode(loaded, [["the", "cat", "zebra", "<unk>", "sat"]]) == (ids, wids)
    assert loaded.mask_token_id == 2 and loaded.pad_token_id == 0
    assert "token_type_ids" not in loaded(["the"], is_split_into_words=True)


def test_save_tokenizer_names_a_class_transformers_4_and_5_both_load(tmp_path):
    import json

    tok = build_word_tokenizer(CORPUS, add_cls=True)
    save_tokenizer(tok, tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"  # v5 alone writes TokenizersBackend
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert encode(loaded, [["the", "cat"]]) == encode(tok, [["the", "cat"]])


def test_add_cls_prepends_cls_with_word_id_none(tmp_path):
    tok = build_word_tokenizer(CORPUS, add_cls=True)
    ids, wids = encode(tok, [["the", "cat"]])
    assert ids == [[3, 4, 5]] and wids == [[None, 0, 1]]
    tok.save_pretrained(tmp_path)
    assert encode(AutoTokenizer.from_pretrained(tmp_path), [["the", "cat"]]) == (ids, wids)


def test_word_tokenizer_on_ptb_sample_words_is_one_token_per_word(ptb_sample_words):
    sentences = ptb_sample_words
    tok = build_word_tokenizer(sentences)
    ids, wids = encode(tok, sentences)
    assert len(ids) == len(sentences) == 3914
    for s, i, w in zip(sentences, ids, wids):
        assert len(i) == len(s) and w == list(range(len(s)))
    assert 1 not in {t for i in ids for t in i}  # every training word is in the vocabulary
    assert tok.convert_ids_to_tokens(ids[0]) == sentences[0]


def test_encode_overflow():
    tok = build_word_tokenizer(CORPUS, add_cls=True)
    long = [["the", "cat", "sat", "the", "dog"], ["a", "cat"]]
    with pytest.raises(InputError, match="sentence 1"):
        encode(tok, long, max_length=4)
    ids, wids = encode(tok, long, max_length=4, overflow="skip")
    assert ids == [[3, 7, 5]]
    ids, wids = encode(tok, long, max_length=4, overflow="split")
    assert ids == [[3, 4, 5, 6], [3, 4, 8], [3, 7, 5]]
    assert wids == [[None, 0, 1, 2], [None, 3, 4], [None, 0, 1]]
    with pytest.raises(InputError):
        encode(tok, [["a b"]])
    with pytest.raises(InputError):
        encode(tok, ["the cat"])


def test_wordpiece_tokenizer_pieces_stay_inside_words(tmp_path):
    corpus = [["the", "cats", "sat", "on", "the", "mats"], ["a", "cat", "sat"], ["the", "mat", "<unk>"]] * 5
    tok = build_wordpiece_tokenizer(corpus, vocab_size=40)
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    sentence = ["the", "catsat", "sats", "<unk>", "on"]
    ids, wids = encode(tok, [sentence])
    pieces = tok.convert_ids_to_tokens(ids[0])
    # each word's pieces are contiguous and re-join to the word
    for k, word in enumerate(sentence):
        joined = "".join(p.removeprefix("##") for p, w in zip(pieces, wids[0]) if w == k)
        assert joined == ("[UNK]" if word == "<unk>" else word)
    assert sorted(set(wids[0])) == list(range(len(sentence))) and wids[0] == sorted(wids[0])
    assert len(ids[0]) > len(sentence)  # some word was cut into pieces
    assert not any("UNK" in piece and piece != "[UNK]" for piece in tok.get_vocab())
    tok.save_pretrained(tmp_path)
    assert encode(AutoTokenizer.from_pretrained(tmp_path), [sentence]) == (ids, wids)


def test_word_links_hand_example():
    # [CLS] the cat ##s sat on ##to it  -> words: the cats sat onto it
    wids = [None, 0, 1, 1, 2, 3, 3, 4]
    token_links = [0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]  # gap t between token t and t+1
    # word gaps: the|cat = token gap 1, ##s|sat = 3, sat|on = 4, ##to|it = 6
    assert word_links(token_links, wids) == [0.1, 0.3, 0.4, 0.6]
    layered = torch.tensor([token_links, [x * 2 for x in token_links]])  # (L, T-1)
    out = word_links(layered, wids)
    assert out.shape == (2, 4)
    assert torch.allclose(out, torch.tensor([[0.1, 0.3, 0.4, 0.6], [0.2, 0.6, 0.8, 1.2]]))
    # one token per word, no specials: identity
    assert word_links([0.5, 0.25], [0, 1, 2]) == [0.5, 0.25]
    # a one-word sentence has no gaps
    assert word_links([0.9], [0, 0]) == []
