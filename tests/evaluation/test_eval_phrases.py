"""Evaluating a model whose multi-granularity prior has ``tree`` heads (MG-SA, DESIGN.md §3.3):
``perplexity --phrases`` and ``probe --phrases`` (gold, induced), equal to a hand loop over sentences
with their own phrase ids; missing, unneeded and mismatched phrases are one-line errors."""

import json

import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.data.phrases import cut_tree, gold_phrase_trees, token_phrase_ids, word_phrase_ids
from syntaxformer.errors import InputError

torch.set_num_threads(1)

#: a config whose third head reads the tree phrases (tests/data/test_phrases.py), cut at level 2 (not the
#: default); no ON-LSTM phrase interaction (a recurrence per input: slow on one thread)
TREE_HEADS = {
    "mgsa_granularities": "word*2,tree,2gram",
    "num_attention_heads": 4,
    "mgsa_tree_level": 2,
    "mgsa_interaction": "none",
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny MG-SA model with a ``tree`` head trained 3 steps with gold phrases on 40 sentences of
    ptb-sample:dev (``train.mrg``), 6 further sentences (``test.mrg``), and an untrained tiny Tree
    Transformer (constituent prior: it reads no phrases, and induces trees)."""
    from syntaxformer.data.tokenization import build_word_tokenizer, save_tokenizer
    from syntaxformer.data.treebank import read_treebank
    from syntaxformer.models import MODELS, make_config
    from syntaxformer.tasks.run import train

    root = tmp_path_factory.mktemp("evalphrases")
    raw = list(read_treebank("ptb-sample:dev"))
    for name, part in (("train", raw[:40]), ("test", raw[40:46])):
        (root / f"{name}.mrg").write_text("".join(" ".join(str(t).split()) + "\n" for t in part))
    mg = train(
        out=str(root / "mg"),
        model="tree-transformer",
        preset="tiny",
        prior="multi-granularity",
        overrides=dict(TREE_HEADS),
        corpus=str(root / "train.mrg"),
        phrases="gold",
        add_cls=True,
        min_freq=1,
        max_steps=3,
        batch_size=8,
        eval_every=0,
        seed=0,
        quiet=True,
        threads=1,
    )
    tokenizer = build_word_tokenizer(
        [w for name in ("train", "test") for w in gold_phrase_trees(str(root / f"{name}.mrg"))[0]], add_cls=True
    )
    torch.manual_seed(0)
    tt = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", len(tokenizer)))
    tt.save_pretrained(root / "tt")
    save_tokenizer(tokenizer, root / "tt")
    return {"mg": mg, "tt": root / "tt", "test": root / "test.mrg"}


def _hand_perplexity(folder, sentences, trees, level):
    """exp(mean cross-entropy) with one call per masked word, phrase ids at ``level`` of ``trees``: per
    sentence its tree, or a function ``(sentence, word) -> tree`` of the copy masking that word."""
    from syntaxformer.parsing import load_model

    model, tokenizer, _ = load_model(folder, device="cpu")
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for s, words in enumerate(sentences):
            enc = tokenizer([words], is_split_into_words=True)
            ids = torch.tensor(enc["input_ids"][0])
            for w, p in enumerate([t for t, x in enumerate(enc.word_ids(0)) if x is not None]):
                tree = trees(s, w) if callable(trees) else trees[s]
                phrase_ids = torch.tensor([token_phrase_ids(word_phrase_ids(cut_tree(tree, level)), enc.word_ids(0))])
                masked = ids.clone()
                masked[p] = tokenizer.mask_token_id
                logits = model(masked[None], structure_inputs={"phrase_ids": phrase_ids}).logits[0, p]
                total += float(torch.nn.functional.cross_entropy(logits.double()[None], ids[p][None]))
                n += 1
    return float(torch.tensor(total / n).exp()), n


def test_perplexity_with_gold_phrases_is_the_hand_loop(folders, capsys):
    from syntaxformer.workflows.perplexity import evaluate_folder

    result = evaluate_folder(
        folders["mg"], str(folders["test"]), batch_tokens=64, device="cpu", phrases="gold"
    )  # small batches: rows of several sentences share a batch
    words, trees = gold_phrase_trees(str(folders["test"]))
    expected, n = _hand_perplexity(folders["mg"], words, trees, 2)
    assert result["phrases"] == "gold" and result["tree_level"] == 2 and result["trees"] is None
    assert result["n_tokens"] == n and result["n_sentences"] == 6
    assert abs(result["perplexity"] - expected) <= 1e-6 * expected
    # the phrases are read: other partitions (level 1) give another perplexity
    assert abs(_hand_perplexity(folders["mg"], words, trees, 1)[0] - expected) > 1e-6 * expected
    code = main(
        [
            "perplexity",
            "--model",
            str(folders["mg"]),
            "--corpus",
            str(folders["test"]),
            "--phrases",
            "gold",
            "--device",
            "cpu",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["phrases"] == "gold" and abs(report["perplexity"] - expected) <= 1e-6 * expected


def test_perplexity_with_induced_phrases(folders):
    """``induced_from="sentence"``: every copy reads the unmasked sentence's phrases; the default
    ``"masked"``: copy w reads the phrases of the tree induced with word w shown as [MASK]."""
    from syntaxformer.sources.induced import induced_phrase_trees
    from syntaxformer.workflows.perplexity import evaluate_folder

    phrases = f"induced:{folders['tt']}"
    result = evaluate_folder(
        folders["mg"], str(folders["test"]), device="cpu", phrases=phrases, induced_from="sentence"
    )
    from syntaxformer.data.corpus import load_corpus

    words = load_corpus(str(folders["test"]))
    expected, _ = _hand_perplexity(folders["mg"], words, induced_phrase_trees(str(folders["tt"]), words), 2)
    assert result["phrases"] == phrases and abs(result["perplexity"] - expected) <= 1e-6 * expected
    copy = evaluate_folder(folders["mg"], str(folders["test"]), batch_tokens=64, device="cpu", phrases=phrases)
    expected_copy, n = _hand_perplexity(
        folders["mg"], words, lambda s, w: induced_phrase_trees(str(folders["tt"]), [words[s]], masked=[w])[0], 2
    )
    assert copy["induced_from"] == "masked" and copy["n_tokens"] == n
    assert abs(copy["perplexity"] - expected_copy) <= 1e-6 * expected_copy


def test_missing_unneeded_and_mismatched_phrases_are_one_line_errors(folders, capsys, monkeypatch):
    from syntaxformer.evaluation.perplexity import masked_lm_perplexity
    from syntaxformer.parsing import load_model
    from syntaxformer.workflows.perplexity import evaluate_folder

    with pytest.raises(InputError, match="'tree' heads, which need a phrase partition.*pass --phrases gold"):
        evaluate_folder(folders["mg"], "no-such-corpus.txt", device="cpu")  # before the corpus is read
    with pytest.raises(InputError, match="has no 'tree' heads and reads no phrases"):
        evaluate_folder(folders["tt"], "no-such-corpus.txt", device="cpu", phrases="gold")
    for model in ("mg", "tt"):
        args = ["perplexity", "--model", str(folders[model]), "--corpus", str(folders["test"]), "--device", "cpu"]
        code = main(args if model == "mg" else args + ["--phrases", "gold"])
        err = capsys.readouterr().err
        assert code == 1 and "--phrases" in err and err.count("\n") == 1
    code = main(["perplexity", "--model", "no-such-folder", "--corpus", "x", "--phrases", "silver"])
    err = capsys.readouterr().err
    assert code == 1 and "--phrases must be gold or induced:MODEL_DIR" in err and err.count("\n") == 1
    # an induced tree whose words differ from its sentence: the inducing folder and the sentence are named
    import syntaxformer.sources.induced as induced  # where the induced phrases are decoded

    real = induced.decode

    def wrong_second(structures, options):
        trees, rest = real(structures, options)
        trees[1][0] = "zzz"  # a leaf of a one-word phrase, or a subtree: the words differ either way
        return trees, rest

    monkeypatch.setattr(induced, "decode", wrong_second)
    with pytest.raises(InputError, match=r"sentence 2: the constituency tree's words do not match") as error:
        evaluate_folder(folders["mg"], str(folders["test"]), device="cpu", phrases=f"induced:{folders['tt']}")
    assert str(folders["tt"]) in str(error.value) and "\n" not in str(error.value)
    model, tokenizer, _ = load_model(folders["mg"], device="cpu")
    with pytest.raises(InputError, match=r"sentence 2: the phrase partition has 1 phrase ids for 3 words"):
        masked_lm_perplexity(
            model,
            tokenizer,
            [["the", "dog"], ["a", "b", "c"]],
            structures=[{"phrase_ids": [0, 0]}, {"phrase_ids": [0]}],
        )
    # one structure per masked copy: one per word, each one entry per word
    with pytest.raises(InputError, match=r"sentence 2: 2 masked-copy structures for 3 words"):
        masked_lm_perplexity(
            model,
            tokenizer,
            [["the", "dog"], ["a", "b", "c"]],
            structures=[{"phrase_ids": [0, 0]}, [{"phrase_ids": [0, 0, 0]}] * 2],
        )
    with pytest.raises(InputError, match=r"sentence 1: the phrase partition has 1 phrase ids for 2 words"):
        masked_lm_perplexity(
            model, tokenizer, [["the", "dog"]], structures=[[{"phrase_ids": [0, 0]}, {"phrase_ids": [0]}]]
        )


def test_probe_with_gold_phrases(folders, tmp_path, capsys):
    from syntaxformer.data import load_gold_trees
    from syntaxformer.data.structure_source import StructureSource
    from syntaxformer.parsing import load_model
    from syntaxformer.probing.features import sentence_vectors
    from syntaxformer.probing.tasks import build_tasks
    from syntaxformer.workflows.probe import _task_phrases

    code = main(
        [
            "probe",
            "--model",
            str(folders["mg"]),
            "--out",
            str(tmp_path / "probe"),
            "--treebank",
            "ptb-sample:dev",
            "--max-sentences",
            "20",
            "--task",
            "BShift",
            "--classifier",
            "logreg",
            "--phrases",
            "gold",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["phrases"] == "gold" and report["tree_level"] == 2
    assert len(report["tasks"]["BShift"]["layers"]["untrained"]) == 4  # embeddings and 3 layers
    gold = load_gold_trees("ptb-sample:dev")[:20]
    built = build_tasks(gold, 0, ["BShift"])
    phrases = _task_phrases(StructureSource.parse("gold", "--phrases"), built, gold, 2)["BShift"]
    for item, ids in zip(built["BShift"], phrases):  # swapped or not: the unswapped sentence's partition
        assert ids == word_phrase_ids(cut_tree(gold[item.index], 2)) and len(ids) == len(item.words)
    # the vectors are the means of the layers' outputs with each sentence's own phrase ids
    model, tokenizer, _ = load_model(folders["mg"], device="cpu")
    words = [t.leaves() for t in gold[:3]]
    partitions = [word_phrase_ids(cut_tree(t, 2)) for t in gold[:3]]
    layers, _ = sentence_vectors(
        model.eval(), tokenizer, words, batch_size=2, structures=[{"phrase_ids": p} for p in partitions]
    )
    for s in range(3):
        enc = tokenizer([words[s]], is_split_into_words=True)
        ids = torch.tensor([token_phrase_ids(partitions[s], enc.word_ids(0))])
        with torch.no_grad():
            alone = model(
                torch.tensor(enc["input_ids"]), structure_inputs={"phrase_ids": ids}, output_hidden_states=True
            ).hidden_states
        for layer, h in enumerate(alone):
            assert torch.allclose(torch.from_numpy(layers[layer][s]), h[0].mean(0), atol=1e-5)


def test_probe_refuses_missing_and_unneeded_phrases(folders, tmp_path, capsys):
    for model, extra, message in (("mg", [], "pass --phrases"), ("tt", ["--phrases", "gold"], "reads no phrases")):
        out = tmp_path / model
        code = main(
            [
                "probe",
                "--model",
                str(folders[model]),
                "--out",
                str(out),
                "--max-sentences",
                "20",
                "--task",
                "SentLen",
                "--classifier",
                "logreg",
                *extra,
            ]
        )
        err = capsys.readouterr().err
        assert code == 1 and message in err and err.count("\n") == 1
        assert not out.exists()  # refused before any work
