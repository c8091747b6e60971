"""End-to-end tests of ``syntaxformer.parsing``: model folder -> structures -> trees (and heads).

The models are the untrained ``tiny`` ones of the ``tiny_model`` fixture (``conftest.py``): what is
checked is the plumbing (shapes, order, batching, padding, word pieces, normalisation, decoders,
errors), which does not depend on training.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from syntaxformer.data.preprocess import normalise_word
from syntaxformer.data.tokenization import encode
from syntaxformer.decoding.dependency import is_tree
from syntaxformer.decoding.spans import brackets, labelled_spans, split_by_distance
from syntaxformer.decoding.tree_transformer import algorithm1, single_layer
from syntaxformer.errors import InputError
from syntaxformer.parsing import DecoderOptions, Structures, decode, load_model, model_structures
from syntaxformer.structures import SyntacticDistances

torch.set_num_threads(1)

#: Sentences of ptb-sample used here: varied lengths (1 to 60+ words) in file order.
N_SENTENCES = 120


@pytest.fixture(scope="module")
def sentences(ptb_gold):
    """The first ``N_SENTENCES`` ptb-sample sentences, a 1-word and a 2-word one, mixed case."""
    words = [list(t.leaves()) for t in ptb_gold[:N_SENTENCES]]
    words[5] = [w.capitalize() for w in words[5]]  # casing must not change anything but the leaves
    return words + [["Yes"], ["it", "rains"]]


@pytest.fixture(scope="module")
def tree_transformer(tiny_model):
    return load_model(tiny_model("tree-transformer"))


@pytest.fixture(scope="module")
def structformer(tiny_model):
    return load_model(tiny_model("structformer"))


def _spans(tree) -> set:
    """Constituent spans of length >= 2 (the whole sentence included), as the decoders return them."""
    return {(i, j) for i, j, _ in labelled_spans(tree) if j - i >= 2}


# ------------------------------------------------------------------------------------------------
# load_model


def test_load_model_gives_eval_model_tokenizer_and_info(tiny_model):
    model, tokenizer, info = load_model(tiny_model("tree-transformer"))
    assert type(model).__name__ == "TreeTransformerForMaskedLM"
    assert not model.training
    assert tokenizer.pad_token_id == 0 and tokenizer.mask_token_id == 2
    assert info == {}  # save_pretrained only: no training.json


@pytest.mark.parametrize("make", [lambda p: p / "absent", lambda p: p])
def test_load_model_not_a_model_folder(tmp_path, make):
    folder = make(tmp_path)
    with pytest.raises(InputError) as e:
        load_model(folder)
    assert e.value.path == str(folder) and str(folder) in str(e.value)
    assert "\n" not in str(e.value)


def test_load_model_unreadable_training_record_is_input_error(tiny_model, tmp_path):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(tiny_model("tree-transformer"), folder)
    (folder / "training.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="unreadable training record") as e:
        load_model(folder)
    assert e.value.path == str(folder / "training.json")


@pytest.mark.parametrize("device, message", [("gpu", "is not a torch device"), ("cuda:99", "CUDA device")])
def test_load_model_bad_device_is_input_error(tiny_model, device, message):
    with pytest.raises(InputError, match=message):
        load_model(tiny_model("tree-transformer"), device)


def test_a_model_that_induces_no_trees_is_an_input_error():
    from transformers import BertConfig, BertForMaskedLM

    bert = BertForMaskedLM(
        BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8)
    )
    with pytest.raises(InputError, match="cannot parse with a BertForMaskedLM"):
        model_structures(bert, None, [["a", "b"]])


# ------------------------------------------------------------------------------------------------
# model_structures: Tree Transformer


def test_link_probs_shape_range_and_order(tree_transformer, sentences):
    model, tokenizer, _ = tree_transformer
    result = model_structures(model, tokenizer, sentences, batch_size=16)
    assert len(result) == len(sentences)
    layers = model.config.num_hidden_layers
    for words, s in zip(sentences, result):
        assert s.words == words  # input order, words as given (casing kept)
        assert s.link_probs.shape == (layers, len(words) - 1)
        assert s.distances is None and s.dependency_probs is None
        a = s.link_probs
        assert np.all((a > 0) & (a <= 1))
        # the hierarchical constraint (eq. 8): a^l >= a^{l-1}, gap by gap
        assert np.all(np.diff(a, axis=0) >= -1e-12)
    # a 2-word sentence: each word has one neighbour, the two-way softmax gives 1 on both sides
    np.testing.assert_allclose(result[-1].link_probs, np.ones((layers, 1)), atol=1e-6)
    assert result[-2].link_probs.shape == (layers, 0)


def test_batching_and_padding_do_not_change_link_probs(tree_transformer, sentences):
    """Batch size 1 (no padding) vs 64 and 7 (sentences of many lengths padded together): same
    numbers, each sentence in its input place."""
    model, tokenizer, _ = tree_transformer
    reference = model_structures(model, tokenizer, sentences, batch_size=1)
    for batch_size in (64, 7):
        other = model_structures(model, tokenizer, sentences, batch_size=batch_size)
        for k, (r, o) in enumerate(zip(reference, other)):
            assert o.words == sentences[k]
            np.testing.assert_allclose(
                o.link_probs, r.link_probs, rtol=0, atol=1e-6, err_msg=f"sentence {k + 1}, batch size {batch_size}"
            )


def test_words_are_normalised_before_the_model(tree_transformer):
    """Casing and numbers do not change the structures (lower-case, a word with a digit -> N), and
    the trees keep the words as given."""
    model, tokenizer, _ = tree_transformer
    given = ["The", "Company", "earned", "$", "3.5", "billion", "in", "1989"]
    plain = ["the", "company", "earned", "$", "N", "billion", "in", "N"]
    a, b = model_structures(model, tokenizer, [given, plain])
    np.testing.assert_array_equal(a.link_probs, b.link_probs)
    trees, heads = decode([a])
    assert trees[0].leaves() == given and heads is None
    # without normalisation the capitalised words are unknown to the vocabulary: other numbers
    raw = model_structures(model, tokenizer, [given], normalise=False)[0]
    assert not np.allclose(raw.link_probs, a.link_probs)


def test_wordpiece_links_are_the_word_boundary_token_links(tiny_model, sentences):
    """A WordPiece model gives word-level links [L, n-1]: the token link across each word boundary
    (last piece of word k | first piece of word k+1), computed here from an unbatched forward pass."""
    model, tokenizer, _ = load_model(tiny_model("tree-transformer", "wordpiece"))
    some = sentences[:20] + sentences[-2:]
    result = model_structures(model, tokenizer, some, batch_size=8)
    ids, word_ids = encode(tokenizer, [[normalise_word(w) for w in s] for s in some])
    split_words = 0
    for words, s, tok_ids, wids in zip(some, result, ids, word_ids):
        assert s.link_probs.shape == (model.config.num_hidden_layers, len(words) - 1)
        split_words += len(tok_ids) - len(words)
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([tok_ids]))
        token_links = torch.stack(out.link_probs, dim=1)[0].double().numpy()  # (L, T-1)
        boundaries = [t for t in range(len(tok_ids) - 1) if wids[t] != wids[t + 1]]
        assert len(boundaries) == len(words) - 1
        np.testing.assert_allclose(s.link_probs, token_links[:, boundaries], atol=1e-6)
    assert split_words > 100  # the 300-entry vocabulary really splits words into pieces


def test_masked_word_is_the_mask_token_in_its_place(tree_transformer, structformer, tiny_model, sentences):
    """``masked=[w, ...]``: word w is read as [MASK] (the same numbers as the word ``[MASK]`` written
    in its place; every piece of it under WordPiece), the structure still covers every word, and None
    leaves a sentence unmasked."""
    some = [[normalise_word(w) for w in s] for s in sentences[:12]]
    masked = [len(s) // 2 for s in some[:-1]] + [None]
    for model, tokenizer, _ in (tree_transformer, structformer):
        by_option = model_structures(model, tokenizer, some, batch_size=5, normalise=False, masked=masked)
        written = [s if w is None else s[:w] + [tokenizer.mask_token] + s[w + 1 :] for s, w in zip(some, masked)]
        by_word = model_structures(model, tokenizer, written, batch_size=5, normalise=False)
        plain = model_structures(model, tokenizer, some, batch_size=5, normalise=False)

        def numbers(s):  # the Tree Transformer's link probabilities, StructFormer's distances
            return s.link_probs if s.link_probs is not None else s.distances

        for a, b, words in zip(by_option, by_word, some):
            assert a.words == words
            np.testing.assert_allclose(numbers(a), numbers(b), atol=1e-6)
        assert not np.allclose(numbers(by_option[0]), numbers(plain[0]))  # the mask is read
        np.testing.assert_allclose(numbers(by_option[-1]), numbers(plain[-1]), atol=1e-6)
    model, tokenizer, _ = load_model(tiny_model("tree-transformer", "wordpiece"))
    ids, word_ids = encode(tokenizer, some)
    long_word = next((w for w in range(len(some[0])) if word_ids[0].count(w) > 1), None)
    assert long_word is not None  # a word of several pieces
    a = model_structures(model, tokenizer, [some[0]], normalise=False, masked=[long_word])[0]
    tok = [tokenizer.mask_token_id if w == long_word else t for t, w in zip(ids[0], word_ids[0])]
    with torch.inference_mode():
        links = torch.stack(model(input_ids=torch.tensor([tok])).link_probs, dim=1)[0].double().numpy()
    boundaries = [t for t in range(len(tok) - 1) if word_ids[0][t] != word_ids[0][t + 1]]
    np.testing.assert_allclose(a.link_probs, links[:, boundaries], atol=1e-6)


def test_bad_masked_words_are_input_errors(tree_transformer):
    model, tokenizer, _ = tree_transformer
    with pytest.raises(InputError, match="2 masked words for 1 sentences"):
        model_structures(model, tokenizer, [["a", "b"]], masked=[0, 1])
    with pytest.raises(InputError, match="word 3 is not in the sentence") as e:
        model_structures(model, tokenizer, [["a", "b"], ["c", "d"]], masked=[0, 2])
    assert e.value.sentence == 2


def test_empty_sentence_is_an_input_error_naming_it(tree_transformer):
    model, tokenizer, _ = tree_transformer
    with pytest.raises(InputError) as e:
        model_structures(model, tokenizer, [["a", "b"], ["c"], [], ["d"]])
    assert e.value.sentence == 3 and "sentence 3" in str(e.value)


# ------------------------------------------------------------------------------------------------
# decoding the Tree Transformer's links


def test_decode_algorithm1_and_single_layer(tree_transformer, sentences):
    model, tokenizer, _ = tree_transformer
    structures = model_structures(model, tokenizer, sentences)
    layers = model.config.num_hidden_layers
    options = DecoderOptions(threshold=0.75, min_layer=1)
    trees, heads = decode(structures, options)
    assert heads is None
    non_binary = 0
    for words, s, tree in zip(sentences, structures, trees):
        assert tree.leaves() == words and tree.label() == "S"
        expected = algorithm1(s.constituency.probs, threshold=0.75, min_layer=1)
        assert s.spans(options) == expected
        assert _spans(tree) == (expected if len(words) > 1 else set())
        non_binary += any(len(node) > 2 for node in tree.subtrees())
    # an untrained model's top layer links all exceed 0.8: the default decoder (min layer 2 = the
    # top of 3 layers) gives flat trees; threshold 0.75 from layer 1 gives real, partly flat, trees
    assert non_binary > 0 and sum(len(brackets(t)) for t in trees) > len(trees)
    default_trees, _ = decode(structures)
    assert all(brackets(t) == set() for t in default_trees)
    # single layer: binary trees equal to the top-down split of that layer
    for layer in range(layers):
        trees, _ = decode(structures, DecoderOptions(layer=layer))
        for words, s, tree in zip(sentences, structures, trees):
            assert _spans(tree) == (single_layer(s.constituency.probs[layer]) if len(words) > 1 else set())
            assert all(len(node) == 2 for node in tree.subtrees()) or len(words) == 1


def test_decode_option_errors(tree_transformer):
    model, tokenizer, _ = tree_transformer
    s = model_structures(model, tokenizer, [["the", "cat", "sat"]])
    layers = model.config.num_hidden_layers
    for bad in (layers, -layers - 1):
        with pytest.raises(InputError, match=f"--layer {bad} out of range"):
            decode(s, DecoderOptions(layer=bad))
    with pytest.raises(InputError, match=f"--min-layer {layers} out of range"):
        decode(s, DecoderOptions(min_layer=layers))


# ------------------------------------------------------------------------------------------------
# StructFormer


def test_structformer_structures_shapes_and_batch_invariance(structformer, sentences):
    model, tokenizer, _ = structformer
    one = model_structures(model, tokenizer, sentences, batch_size=1)
    many = model_structures(model, tokenizer, sentences, batch_size=64)
    for words, a, b in zip(sentences, one, many):
        n = len(words)
        assert b.words == words and isinstance(b.constituency, SyntacticDistances)
        assert b.constituency.distances.shape == (n - 1,) and b.constituency.heights.shape == (n,)
        assert b.dependency.probs.shape == (n, n + 1)
        p = b.dependency.probs
        assert np.all(p >= 0) and np.all(p.sum(axis=1) <= 1 + 1e-6)
        assert np.all(np.diagonal(p[:, 1:]) < 1e-6)  # p_D(i | i) = 0: no word heads itself
        for x, y in (
            (b.constituency.distances, a.constituency.distances),
            (b.constituency.heights, a.constituency.heights),
            (b.dependency.probs, a.dependency.probs),
        ):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)


def test_structformer_decode_trees_and_heads(structformer, sentences):
    model, tokenizer, _ = structformer
    structures = model_structures(model, tokenizer, sentences)
    trees, heads = decode(structures)
    argmax = [s.heads(DecoderOptions(dependency="argmax")) for s in structures]
    for words, s, tree, h, h_argmax in zip(sentences, structures, trees, heads, argmax):
        assert tree.leaves() == words
        assert _spans(tree) == (split_by_distance(list(s.constituency.distances)) if len(words) > 1 else set())
        assert all(len(node) == 2 for node in tree.subtrees()) or len(words) == 1
        assert len(h) == len(words) and is_tree(h, single_root=True)
        assert len(h_argmax) == len(words) and all(0 <= x <= len(words) for x in h_argmax)
    with pytest.raises(InputError, match="unknown dependency decoder"):
        decode(structures[:1], DecoderOptions(dependency="eisner"))


@pytest.mark.parametrize("options", [DecoderOptions(layer=0), DecoderOptions(min_layer=1)])
def test_structformer_rejects_tree_transformer_options(structformer, options):
    model, tokenizer, _ = structformer
    s = model_structures(model, tokenizer, [["the", "cat", "sat"]])
    with pytest.raises(InputError, match="Tree Transformer decoder option"):
        decode(s, options)


def test_structformer_with_word_pieces_is_an_input_error(tiny_model):
    model, tokenizer, _ = load_model(tiny_model("structformer", "wordpiece"))
    with pytest.raises(InputError, match="one token per word"):
        model_structures(model, tokenizer, [["the", "unbelievable", "company"]])


def test_structures_from_numbers_decode_without_a_model():
    """decode() is usable on hand-built structures: a known distance vector gives its tree."""
    s = Structures(words=["a", "b", "c", "d"], items=[SyntacticDistances(np.array([0.1, 0.9, 0.2]))])
    trees, heads = decode([s])
    assert str(trees[0]) == "(S (X a b) (X c d))" and heads is None


def test_cls_token_is_not_a_word(tmp_path, sentences):
    """A tokenizer that prepends [CLS] (the public code's input): the [CLS]|first-word link is
    dropped, the word links are the token links after it."""
    from syntaxformer.data.tokenization import build_word_tokenizer
    from syntaxformer.models import MODELS, make_config

    tok = build_word_tokenizer([[normalise_word(w) for w in s] for s in sentences], add_cls=True)
    torch.manual_seed(0)
    MODELS["tree-transformer"](make_config("tree-transformer", "tiny", len(tok))).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, tokenizer, _ = load_model(tmp_path)
    some = sentences[:10] + sentences[-2:]
    result = model_structures(model, tokenizer, some, batch_size=4)
    ids, _ = encode(tokenizer, [[normalise_word(w) for w in s] for s in some])
    for words, s, tok_ids in zip(some, result, ids):
        assert tok_ids[0] == tokenizer.cls_token_id and len(tok_ids) == len(words) + 1
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([tok_ids]))
        token_links = torch.stack(out.link_probs, dim=1)[0].double().numpy()  # (L, n)
        np.testing.assert_allclose(s.link_probs, token_links[:, 1:], atol=1e-6)


def test_batch_size_below_one_is_an_input_error(tree_transformer):
    model, tokenizer, _ = tree_transformer
    with pytest.raises(InputError, match="--batch-size must be at least 1"):
        model_structures(model, tokenizer, [["a", "b"]], batch_size=0)
