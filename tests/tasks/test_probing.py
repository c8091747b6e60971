"""Probing tasks and the ``probe`` command (Conneau et al. 2018; DESIGN.md §6)."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest
import torch
from nltk import Tree

from syntaxformer.cli import main
from syntaxformer.data import load_gold_trees
from syntaxformer.models import MODELS, make_config
from syntaxformer.probing import build_tasks, write_task_files
from syntaxformer.probing.classifiers import majority, probe
from syntaxformer.probing.features import sentence_vectors
from syntaxformer.probing.tasks import bigram_shift, parse_tree_depth, top_constituents

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def trees():
    return load_gold_trees("ptb-sample")


def test_depth_and_top_constituents_of_a_hand_tree():
    tree = Tree.fromstring("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))))")
    assert parse_tree_depth(tree) == 5  # S -> VP -> PP -> NP -> NN -> mat
    assert top_constituents(tree) == "NP VP"
    assert top_constituents(Tree.fromstring("(S (S+VP (VB go)) (RB now))")) == "S RB"


def test_tasks_on_ptb_sample(trees):
    tasks = build_tasks(trees, seed=0)
    assert set(tasks) == {"SentLen", "TreeDepth", "TopConst", "BShift"}
    n = len(trees)
    assert n == 3914 and all(len(tasks[t]) == n for t in ("SentLen", "TreeDepth", "TopConst"))
    parts = Counter(it.split for it in tasks["SentLen"])
    assert parts == {"train": 3131, "dev": 391, "test": 392}
    # one-word sentences cannot be inverted: BShift leaves them out, and only them
    singles = sum(len(set(t.leaves())) == 1 for t in trees)
    assert len(tasks["BShift"]) == n - singles
    inverted = [it for it in tasks["BShift"] if it.label == "I"]
    assert 0.45 < len(inverted) / len(tasks["BShift"]) < 0.55
    for it in inverted:  # exactly one adjacent pair swapped
        gold = trees[it.index].leaves()
        diff = [k for k in range(len(gold)) if gold[k] != it.words[k]]
        assert len(diff) == 2 and diff[1] == diff[0] + 1 and sorted(gold) == sorted(it.words)
    assert len({it.label for it in tasks["TopConst"]}) == 20  # 19 sequences + OTHER
    assert Counter(it.label for it in tasks["TopConst"]).most_common(1)[0][0] == "NP VP"


def test_task_files_are_deterministic_and_splits_disjoint(trees, tmp_path):
    a = write_task_files(build_tasks(trees, seed=3), tmp_path / "a")
    b = write_task_files(build_tasks(trees, seed=3), tmp_path / "b")  # a second, separate build
    c = write_task_files(build_tasks(trees, seed=4), tmp_path / "c")
    assert [p.name for p in a] == [p.name for p in b] == ["SentLen.tsv", "TreeDepth.tsv", "TopConst.tsv", "BShift.tsv"]
    assert [p.read_text() for p in a] == [p.read_text() for p in b]
    assert a[0].read_text() != c[0].read_text()

    def split_map(paths):
        """One index -> split map over all the files; fails when a sentence is in two splits."""
        split_of = {}
        for path in paths:
            indices = []
            for line in path.read_text().splitlines():
                index, split, _, _ = line.split("\t")
                indices.append(int(index))
                assert split_of.setdefault(int(index), split) == split, (path.name, index)
            assert len(indices) == len(set(indices)), path.name  # a sentence at most once per task
        return split_of

    split_of = split_map(a)
    # the same cut for every task: a sentence is in one split whatever the task; 3,914 sentences cut
    # 80/10/10: round(3131.2) = 3131 train, round(391.4) = 391 dev, the other 392 test
    assert sorted(split_of) == list(range(3914))
    parts = {name: {i for i, s in split_of.items() if s == name} for name in ("train", "dev", "test")}
    assert [len(parts[name]) for name in ("train", "dev", "test")] == [3131, 391, 392]
    assert parts["train"] != set(range(3131))  # a permutation by the seed, not the treebank's order
    other = split_map(c)
    assert sorted(other) == list(range(3914)) and other != split_of  # another seed, another cut


def test_bigram_shift_keeps_or_swaps():
    rng = random.Random(0)
    draws = [bigram_shift(["a", "b", "c", "d"], rng) for _ in range(200)]
    assert {label for _, label in draws} == {"O", "I"}
    assert all(words == ("a", "b", "c", "d") for words, label in draws if label == "O")
    assert bigram_shift(["x", "x"], rng) is None


def test_probe_classifier_learns_a_separable_task_and_majority():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5)).astype(np.float32)
    labels = np.where(x[:, 0] > 0, "pos", "neg")
    split = ["train"] * 200 + ["dev"] * 50 + ["test"] * 50
    result = probe(x, labels, split, "logreg")
    assert result["test"] >= 96.0 and result["strength"] in (0.01, 0.1, 1.0, 10.0)
    noise = probe(rng.normal(size=(300, 5)).astype(np.float32), labels, split, "logreg")
    assert noise["test"] < 75.0
    top = majority(["a", "a", "b", "a", "b", "b"], ["train", "train", "train", "dev", "dev", "test"])
    assert top == {"dev": 50.0, "test": 0.0, "class": "a"}


def test_sentence_vectors_are_means_over_tokens_and_padding_free(tmp_path):
    from syntaxformer.data.tokenization import build_word_tokenizer

    sentences = [["the", "cat", "sat"], ["a", "dog"], ["the", "zebra", "ran", "far", "away"]]
    tokenizer = build_word_tokenizer(sentences[:2])
    config = make_config("tree-transformer", "tiny", len(tokenizer))
    torch.manual_seed(0)
    model = MODELS["tree-transformer"](config).eval()
    layers, counts = sentence_vectors(model, tokenizer, sentences, batch_size=2)
    assert len(layers) == config.num_hidden_layers + 1 and layers[0].shape == (3, config.hidden_size)
    assert counts["unknown_words"] == 4  # zebra, ran, far, away
    ids = torch.tensor([tokenizer.convert_tokens_to_ids(sentences[1])])
    with torch.no_grad():
        alone = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True).hidden_states
    for layer, h in enumerate(alone):
        np.testing.assert_allclose(layers[layer][1], h[0].mean(0).numpy(), atol=1e-5)


def test_probe_command_on_ptb_sample(tmp_path, capsys):
    """The shipped parser tree-transformer-ptb (4 layers) probed with logistic regression on SentLen and
    TreeDepth of the dev half's first 600 sentences:
    SentLen far above the majority class, every layer reported for both encoders, task files,
    report and figure written."""
    out = tmp_path / "probe"
    code = main(
        [
            "probe",
            "--model",
            "tree-transformer-ptb",
            "--out",
            str(out),
            "--treebank",
            "ptb-sample:dev",
            "--max-sentences",
            "600",
            "--task",
            "SentLen",
            "--task",
            "TreeDepth",
            "--classifier",
            "logreg",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert json.loads(capsys.readouterr().out) == report
    sentlen = report["tasks"]["SentLen"]
    assert sentlen["n_sentences"] == {"train": 480, "dev": 60, "test": 60}
    assert len(sentlen["layers"]["trained"]) == len(sentlen["layers"]["untrained"]) == 5
    assert sentlen["best_layer"]["trained"]["logreg"]["test"] > sentlen["majority"]["test"] + 15
    assert sentlen["encoding"]["unknown_words"] > 0
    assert set(report["tasks"]) == {"SentLen", "TreeDepth"}
    assert {p.name for p in out.iterdir()} >= {"report.json", "probe.png", "probe.svg", "tasks"}


def test_probe_bad_task_is_one_line(tmp_path, capsys):
    code = main(["probe", "--out", str(tmp_path / "x"), "--task", "Nope"])
    err = capsys.readouterr().err
    assert code == 1 and "Nope" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["structformer", "on-lstm"])
def test_other_models_give_every_layer(name):
    from syntaxformer.data.tokenization import build_word_tokenizer

    tokenizer = build_word_tokenizer([["the", "cat", "sat"], ["a", "dog"]])
    config = make_config(name, "tiny", len(tokenizer))
    model = MODELS[name](config).eval()
    layers, counts = sentence_vectors(model, tokenizer, [["the", "cat", "sat"], ["a", "dog"]])
    expected = config.num_hidden_layers + 1 if name == "structformer" else config.num_layers
    assert len(layers) == expected and counts == {"sentences": 2, "words": 5, "tokens": 5, "unknown_words": 0}


def test_word_tasks_from_words_alone_equal_those_from_trees(trees):
    """SentLen and BShift built from the sentences alone (a dependency treebank's case) are the items
    built from the trees whose leaves they are; without trees only they are built, and a constituency
    task is refused."""
    from syntaxformer.probing import WORD_TASKS

    part = trees[:300]
    words = [t.leaves() for t in part]
    assert build_tasks(None, 3, words=words) == build_tasks(part, 3, list(WORD_TASKS))
    assert list(build_tasks(None, 3, words=words)) == ["SentLen", "BShift"]
    with pytest.raises(ValueError, match="TreeDepth needs constituency trees"):
        build_tasks(None, 3, ["SentLen", "TreeDepth"], words=words)


def test_probe_command_on_ud_ewt(shared_data, tmp_path, capsys):
    """A CoNLL-U treebank (UD English-EWT dev, first 400 sentences): SentLen and BShift from its
    words (punctuation removed, normalised as the training corpora), SentLen far above the majority
    class; its own heads for ``--trees gold``; a constituency task or ``--phrases gold`` is a one-line
    error naming the file."""
    from syntaxformer.data.trees import gold_tree_sentences
    from syntaxformer.workflows.probe import load_probe_treebank

    conllu = str(shared_data / "ud-ewt" / "en_ewt-ud-dev.conllu")
    out = tmp_path / "probe"
    assert (
        main(
            [
                "probe",
                "--model",
                "tree-transformer-ptb",  # the parser of the probing results page
                "--out",
                str(out),
                "--treebank",
                conllu,
                "--max-sentences",
                "400",
                "--classifier",
                "logreg",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert set(report["tasks"]) == {"SentLen", "BShift"} and report["data"]["n_sentences"] == 400
    sentlen = report["tasks"]["SentLen"]
    assert sentlen["n_sentences"] == {"train": 320, "dev": 40, "test": 40}
    assert sentlen["best_layer"]["trained"]["logreg"]["test"] > sentlen["majority"]["test"] + 15
    words, heads = gold_tree_sentences(conllu)
    rows = [line.split("\t") for line in (out / "tasks" / "SentLen.tsv").read_text().splitlines()]
    assert [r[3].split(" ") for r in rows] == words[:400]
    gold, probed, gold_heads = load_probe_treebank(conllu, None, "gold", None, 400)
    assert gold is None and probed == words[:400] and gold_heads == heads[:400]
    code = main(["probe", "--out", str(tmp_path / "x"), "--treebank", conllu, "--task", "TreeDepth"])
    err = capsys.readouterr().err
    assert code == 1 and "TreeDepth needs constituency trees" in err and conllu in err and err.count("\n") == 1
    from syntaxformer.errors import InputError

    with pytest.raises(InputError, match="--phrases gold needs constituency trees"):
        load_probe_treebank(conllu, None, None, "gold", None)
