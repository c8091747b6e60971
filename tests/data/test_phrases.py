"""``train --phrases``: phrase partitions cut from constituency trees (``syntaxformer/data/phrases.py``)
for the multi-granularity prior's ``"tree"`` heads: gold phrases of a known sentence, the word ->
token mapping, batching with padding, a tiny training run, and the one-line errors."""

from __future__ import annotations

import json
import math

import pytest
import torch

from syntaxformer.data.phrases import (
    NO_LABEL,
    NO_PHRASE,
    OTHER,
    cut_tree,
    gold_phrase_trees,
    label_vocabulary,
    phrase_label_ids,
    token_phrase_ids,
    word_phrase_ids,
)
from syntaxformer.errors import InputError
from syntaxformer.sources.corpus import load_phrase_trees
from syntaxformer.tasks.language_model_data import TrainingData
from syntaxformer.training import TrainArguments

#: a config whose third head reads the tree phrases (4 heads: the tiny preset has 2)
TREE_HEADS = {"mgsa_granularities": "word*2,tree,2gram", "num_attention_heads": 4}


def test_gold_phrases_of_the_first_dev_sentence():
    # ptb-sample:dev sentence 1 after the PRPN preprocessing:
    # (S (NP (NP pierre vinken) (ADJP (NP N years) old)) (VP will (VP join (NP the board) (PP as (NP a ...)) ...)))
    sentences, trees = gold_phrase_trees("ptb-sample:dev")
    words = "pierre vinken N years old will join the board as a nonexecutive director nov. N".split()
    assert sentences[0] == words
    level1 = cut_tree(trees[0], 1)
    assert level1 == [(0, 5, "NP"), (5, 15, "VP")]
    assert word_phrase_ids(level1) == [0] * 5 + [1] * 10
    level2 = cut_tree(trees[0], 2)  # NP's and VP's children: NP, ADJP | MD, VP
    assert word_phrase_ids(level2) == [0, 0, 1, 1, 1, 2] + [3] * 9
    assert [label for _, _, label in level2] == ["NP", "ADJP", "MD", "VP"]


def test_token_mapping_with_cls_and_word_pieces():
    from syntaxformer.data.tokenization import build_word_tokenizer, encode

    words = [["the", "dog", "barked", "loudly"]]
    tokenizer = build_word_tokenizer(words, min_freq=1, add_cls=True)
    _, word_ids = encode(tokenizer, words)
    assert word_ids[0][0] is None  # [CLS]
    assert token_phrase_ids([0, 0, 1, 1], word_ids[0]) == [NO_PHRASE, 0, 0, 1, 1]
    # a word split into pieces: every piece has its word's phrase
    assert token_phrase_ids([0, 1, 1], [None, 0, 0, 1, 2, 2]) == [NO_PHRASE, 0, 0, 1, 1, 1]


def test_labels_in_a_fixed_vocabulary():
    train = [[(0, 2, "NP"), (2, 3, "VP")], [(0, 1, "PP"), (1, 2, None)]]
    vocabulary = label_vocabulary(train)
    assert vocabulary == ["NP", "PP", "VP", OTHER]
    assert phrase_label_ids([(0, 1, "VP"), (1, 2, "SBAR"), (2, 3, None)], vocabulary) == [2, 3, 3]


def test_batching_two_sentences_gives_each_its_own_ids():
    data = TrainingData(
        tokenizer=None,
        train_ids=[[5, 6, 7, 8], [5, 6]],
        valid_ids=[],
        train_sentences=2,
        valid_sentences=0,
        train_over=0,
        valid_over=0,
        valid_desc="",
        train_phrases=[[-1, 0, 0, 1], [-1, 0]],
        train_phrase_labels=[[3, 1], [2]],
        phrases="gold",
    )
    inputs = data.structure_inputs("train", [0, 1])
    assert set(inputs) == {"phrase_ids", "phrase_labels"}
    assert inputs["phrase_ids"].tolist() == [[-1, 0, 0, 1], [-1, 0, NO_PHRASE, NO_PHRASE]]
    assert inputs["phrase_labels"].tolist() == [[3, 1], [2, NO_LABEL]]
    assert data.structure_inputs("train", [1])["phrase_ids"].tolist() == [[-1, 0]]


def test_padding_in_a_batch_does_not_change_a_sentence():
    from syntaxformer.models import MODELS, make_config

    torch.manual_seed(0)
    config = make_config("tree-transformer", "tiny", 50, prior="multi-granularity", **TREE_HEADS)
    model = MODELS["tree-transformer"](config).eval()
    long, short = torch.tensor([[3, 4, 5, 6, 7]]), torch.tensor([[8, 9, 10]])
    ids_long, ids_short = [0, 0, 1, 1, 1], [0, 1, 1]
    batch = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 10, 0, 0]])
    mask = torch.tensor([[1] * 5, [1, 1, 1, 0, 0]])
    from syntaxformer.data.phrases import pad_phrases

    with torch.no_grad():
        both = model(
            input_ids=batch, attention_mask=mask, structure_inputs={"phrase_ids": pad_phrases([ids_long, ids_short])}
        ).logits
        alone = model(
            input_ids=short,
            attention_mask=torch.ones_like(short),
            structure_inputs={"phrase_ids": torch.tensor([ids_short])},
        ).logits
        first = model(
            input_ids=long,
            attention_mask=torch.ones_like(long),
            structure_inputs={"phrase_ids": torch.tensor([ids_long])},
        ).logits
    torch.testing.assert_close(both[1, :3], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(both[0], first[0], atol=1e-5, rtol=1e-5)


def test_training_with_gold_phrases(tmp_path):
    from syntaxformer.parsing import load_model
    from syntaxformer.tasks.run import train

    out = train(
        out=str(tmp_path / "mg"),
        model="tree-transformer",
        preset="tiny",
        prior="multi-granularity",
        overrides={**TREE_HEADS, "mgsa_phrase_loss_weight": 0.5, "mgsa_interaction": "none"},
        corpus="ptb-sample:dev",
        phrases="gold",
        add_cls=True,
        max_length=24,
        max_steps=3,
        batch_size=16,
        eval_every=0,
        save_every=0,
        valid_fraction=0.01,
        quiet=True,
    )
    record = json.loads((out / "training.json").read_text())
    assert record["steps"] == 3 and record["data"]["phrases"] == "gold" and record["data"]["tree_level"] == 1
    assert math.isfinite(record["final_valid_loss"])
    labels = record["data"]["phrase_labels"]
    assert labels[-1] == OTHER and {"NP", "VP"} <= set(labels)
    model, tokenizer, _ = load_model(out)
    assert model.config.mgsa_phrase_labels == labels and model.config.mgsa_num_phrase_labels == len(labels)
    # the saved model's loss on ptb-sample:dev sentence 1 with its gold phrases at level 1 is finite
    words = "pierre vinken N years old will join the board as a nonexecutive director nov. N".split()
    phrases = [(0, 5, "NP"), (5, 15, "VP")]
    enc = tokenizer([words], is_split_into_words=True, return_tensors="pt")
    structure = {
        "phrase_ids": torch.tensor([token_phrase_ids(word_phrase_ids(phrases), enc.word_ids(0))]),
        "phrase_labels": torch.tensor([phrase_label_ids(phrases, labels)]),
    }
    assert structure["phrase_ids"][0, 0] == NO_PHRASE  # [CLS]
    with torch.no_grad():
        loss = model(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            labels=enc["input_ids"],
            structure_inputs=structure,
        ).loss
    assert math.isfinite(float(loss))


def test_a_tree_whose_words_differ_names_the_file_and_sentence(tmp_path):
    path = tmp_path / "two.mrg"
    path.write_text("(S (NP (DT the) (NN dog)) (VP (VBD barked)))\n(S (NP (PRP it)) (VP (VBD ran)))\n")
    sentences, trees = gold_phrase_trees(str(path))
    assert sentences == [["the", "dog", "barked"], ["it", "ran"]]
    with pytest.raises(InputError, match=r"two\.mrg.*sentence 2.*do not match") as error:
        load_phrase_trees("gold", str(path), [["the", "dog", "barked"], ["it", "walked"]])
    assert "\n" not in str(error.value)
    with pytest.raises(InputError, match="--phrases must be"):
        load_phrase_trees("induced:", str(path))


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(prior="constituent", phrases="gold"), "--phrases feeds the 'tree' heads"),
        (dict(prior="multi-granularity", phrases="gold"), "--phrases feeds the 'tree' heads"),  # default: n-grams
        (dict(prior="multi-granularity", overrides=dict(TREE_HEADS)), "needs a phrase partition"),
        (dict(prior="multi-granularity", overrides=dict(TREE_HEADS), phrases="silver"), "--phrases must be"),
        (
            dict(
                prior="multi-granularity",
                overrides={**TREE_HEADS, "mgsa_phrase_loss_weight": 1.0},
                phrases="induced:somewhere",
            ),
            "only --phrases gold",
        ),
    ],
)
def test_option_errors_before_training(tmp_path, options, message):
    args = TrainArguments(out=str(tmp_path / "x"), preset="tiny", max_steps=1, **options)
    with pytest.raises(InputError, match=message) as error:
        args.check()
    assert "\n" not in str(error.value)
    from syntaxformer.tasks.run import train

    with pytest.raises(InputError, match=message):
        train(args)
    assert not (tmp_path / "x" / "training.json").exists()


@pytest.mark.parametrize("model", ["tree-transformer", "structformer"])
def test_induced_phrases_from_a_model_folder(tmp_path, tiny_model, model):
    folder = tiny_model(model)
    corpus = tmp_path / "two.txt"
    corpus.write_text("The dog barked\nit ran away in 1990\n")
    sentences, trees = load_phrase_trees(f"induced:{folder}", str(corpus))
    assert sentences == [["the", "dog", "barked"], ["it", "ran", "away", "in", "N"]]  # load_corpus's words
    assert [t.leaves() for t in trees] == sentences
    # the model's own trees: its structures of the sentences decoded with the default decoder (the
    # folder has no decoder.json), one sentence at a time
    from syntaxformer.parsing import decode, load_model, model_structures
    from syntaxformer.structures import DECODER_FILE, DecoderOptions

    assert not (folder / DECODER_FILE).exists()
    net, tokenizer, _ = load_model(folder, device="cpu")
    expected = [
        decode(model_structures(net.eval(), tokenizer, [words], normalise=False), DecoderOptions())[0][0]
        for words in sentences
    ]
    assert trees == expected
    for words, tree in zip(sentences, trees):
        ids = word_phrase_ids(cut_tree(tree, 1))
        assert len(ids) == len(words) and ids[0] == 0 and all(0 <= b - a <= 1 for a, b in zip(ids, ids[1:]))
