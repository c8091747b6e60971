"""Masked-LM perplexity, the Tree Transformer protocol (one [MASK] per input, every word in turn)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.evaluation.perplexity import PROTOCOL, masked_lm_perplexity, one_mask_inputs


class UniformMLM(torch.nn.Module):
    """A stub masked LM with the models' forward signature: every logit is 0 (uniform over V)."""

    def __init__(self, vocab_size: int, max_position_embeddings: int = 512):
        super().__init__()
        self.config = SimpleNamespace(vocab_size=vocab_size, max_position_embeddings=max_position_embeddings)
        self.calls = []

    def forward(self, input_ids, attention_mask, labels=None):
        self.calls.append(tuple(input_ids.shape))
        return SimpleNamespace(logits=torch.zeros(*input_ids.shape, self.config.vocab_size))


@pytest.fixture(scope="module")
def ptb_sentences(ptb_gold):
    """The first 200 preprocessed ptb-sample sentences (words lower-cased, digits -> N)."""
    return [tree.leaves() for tree in ptb_gold[:200]]


@given(values=st.lists(st.integers(min_value=3, max_value=50), min_size=1, max_size=30))
@settings(max_examples=50, deadline=None)
def test_one_mask_inputs_one_mask_per_row_each_position_once(values):
    mask_id = 2  # never in ids (>= 3)
    ids = torch.tensor(values)
    inputs = one_mask_inputs(ids, mask_id)
    assert ids.tolist() == values  # input left alone (compared with the list it was made from)
    n = len(values)
    assert inputs.shape == (n, n)
    is_mask = inputs == mask_id
    assert is_mask.sum(dim=1).tolist() == [1] * n  # exactly one mask per row
    assert torch.equal(is_mask, torch.eye(n, dtype=torch.bool))  # row i masks position i
    assert torch.equal(inputs[~is_mask], torch.tensor(values).repeat(n, 1)[~is_mask])  # other tokens unchanged
    some = torch.tensor([n - 1, 0])
    assert torch.equal(one_mask_inputs(ids, mask_id, some), inputs[some])


@pytest.mark.parametrize("add_cls", [False, True])
def test_uniform_model_perplexity_equals_vocabulary_size(ptb_sentences, add_cls):
    tokenizer = build_word_tokenizer(ptb_sentences[:100], add_cls=add_cls)
    vocab_size = len(tokenizer)
    model = UniformMLM(vocab_size)
    result = masked_lm_perplexity(model, tokenizer, ptb_sentences, batch_tokens=2000)
    assert result["perplexity"] == pytest.approx(vocab_size, rel=1e-6)
    assert result["cross_entropy"] == pytest.approx(math.log(vocab_size), rel=1e-6)
    assert result["n_tokens"] == sum(len(s) for s in ptb_sentences)
    assert result["n_sentences"] == len(ptb_sentences)
    assert result["vocab_size"] == vocab_size
    assert result["protocol"] == PROTOCOL
    # one input row per word, packed under the token budget
    assert sum(rows for rows, _ in model.calls) == result["n_tokens"]
    assert all(rows * width <= 2000 for rows, width in model.calls)
    # words of the last 100 sentences unseen by the tokenizer are [UNK] targets
    seen = {w for s in ptb_sentences[:100] for w in s}
    assert result["n_unk"] == sum(w not in seen for s in ptb_sentences for w in s) > 0


def test_unk_counted_on_a_hand_example():
    tokenizer = build_word_tokenizer([["the", "cat", "sat"], ["the", "dog"]], add_cls=True)
    model = UniformMLM(len(tokenizer))
    # "fish" and "bird" are out of vocabulary; Mikolov's "<unk>" is mapped to [UNK] too.
    sentences = [["the", "fish", "sat"], ["<unk>", "dog"], [], ["bird"]]
    result = masked_lm_perplexity(model, tokenizer, sentences)
    assert (result["n_tokens"], result["n_unk"]) == (6, 3)
    assert (result["n_sentences"], result["n_empty"]) == (3, 1)


def _tiny_bert(vocab_size: int, max_positions: int = 64):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
    )
    return BertForMaskedLM(config).eval()


def test_batching_and_padding_do_not_change_the_result(ptb_sentences):
    """Each input alone (budget 1: one row per batch, no padding) vs many sentences packed together
    with padding: the same cross-entropy, so packing is exact. Checked on a context-sensitive model."""
    sentences = ptb_sentences[:4]
    tokenizer = build_word_tokenizer(sentences, add_cls=True)
    model = _tiny_bert(len(tokenizer))
    alone = masked_lm_perplexity(model, tokenizer, sentences, batch_tokens=1)
    packed = masked_lm_perplexity(model, tokenizer, sentences, batch_tokens=10_000)
    assert alone["n_tokens"] == packed["n_tokens"] == sum(map(len, sentences))
    assert packed["cross_entropy"] == pytest.approx(alone["cross_entropy"], rel=1e-5)
    # and by hand: sentence 0, each word masked in turn ([CLS] at position 0 is never masked)
    ids = tokenizer(sentences[0], is_split_into_words=True)["input_ids"]
    losses = []
    with torch.no_grad():
        for p in range(1, len(ids)):
            x = torch.tensor([ids])
            x[0, p] = tokenizer.mask_token_id
            logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0, p]
            losses.append(-torch.log_softmax(logits, -1)[ids[p]].item())
    one = masked_lm_perplexity(model, tokenizer, [sentences[0]])
    assert one["n_tokens"] == len(losses) == len(sentences[0])
    assert one["cross_entropy"] == pytest.approx(sum(losses) / len(losses), rel=1e-5)
    assert one["perplexity"] == pytest.approx(math.exp(sum(losses) / len(losses)), rel=1e-5)


def test_too_long_sentences_error_or_are_counted(ptb_sentences):
    tokenizer = build_word_tokenizer(ptb_sentences)
    model = UniformMLM(len(tokenizer), max_position_embeddings=20)
    long = next(i for i, s in enumerate(ptb_sentences) if len(s) > 20)
    with pytest.raises(InputError, match=f"sentence {long + 1}"):
        masked_lm_perplexity(model, tokenizer, ptb_sentences)
    result = masked_lm_perplexity(model, tokenizer, ptb_sentences, too_long="skip")
    too_long = [s for s in ptb_sentences if len(s) > 20]
    assert result["n_skipped"] == len(too_long)
    assert result["n_skipped_words"] == sum(map(len, too_long))
    assert result["n_tokens"] + result["n_skipped_words"] == sum(map(len, ptb_sentences))
    assert result["n_sentences"] + result["n_skipped"] == len(ptb_sentences)


class FullLogitsOnly(torch.nn.Module):
    """Hides a model's ``masked_only`` option, forcing the (B, N, V) logits path."""

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.config = model.config

    def forward(self, input_ids, attention_mask, labels=None):
        return self.inner(input_ids=input_ids, attention_mask=attention_mask)


@pytest.mark.parametrize("prior", ["constituent", "none"])
def test_tree_transformer_masked_only_path_equals_full_logits(ptb_sentences, prior):
    from syntaxformer.models import MODELS, make_config

    sentences = ptb_sentences[:6]
    tokenizer = build_word_tokenizer(sentences)
    torch.manual_seed(0)
    model = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", len(tokenizer), prior=prior)).eval()
    fast = masked_lm_perplexity(model, tokenizer, sentences, batch_tokens=300)
    full = masked_lm_perplexity(FullLogitsOnly(model).eval(), tokenizer, sentences, batch_tokens=300)
    assert fast["n_tokens"] == full["n_tokens"] == sum(map(len, sentences))
    assert fast["cross_entropy"] == pytest.approx(full["cross_entropy"], rel=1e-5)
    assert fast["vocab_size"] == len(tokenizer)
    assert not model.training


@pytest.fixture(scope="module")
def trained_tiny(tmp_path_factory):
    """A tiny Tree Transformer trained 60 steps on ptb-sample by the trainer (~15 s on 2 cores)."""
    from syntaxformer.tasks.run import train

    out = tmp_path_factory.mktemp("tiny-tree-transformer")
    return train(
        out=str(out),
        model="tree-transformer",
        preset="tiny",
        corpus="ptb-sample",
        max_steps=60,
        lr=1e-3,
        batch_size=32,
        seed=0,
        quiet=True,
        eval_every=0,
        save_every=0,
        threads=1,
    )


def test_trained_model_scores_lower_than_its_initialisation(trained_tiny, ptb_sentences):
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    from syntaxformer.models import MODELS

    tokenizer = AutoTokenizer.from_pretrained(trained_tiny)
    trained = AutoModelForMaskedLM.from_pretrained(trained_tiny)
    torch.manual_seed(0)  # the trainer's seed: the same initial parameters
    initial = MODELS["tree-transformer"](AutoConfig.from_pretrained(trained_tiny))
    sentences = ptb_sentences[:60]
    before = masked_lm_perplexity(initial, tokenizer, sentences)
    after = masked_lm_perplexity(trained, tokenizer, sentences)
    assert before["n_tokens"] == after["n_tokens"] == sum(map(len, sentences))
    # at initialisation: about uniform over the vocabulary
    assert before["perplexity"] == pytest.approx(len(tokenizer), rel=0.5)
    assert after["perplexity"] < 0.5 * before["perplexity"]


def test_cli_json_matches_the_library(trained_tiny, ptb_sentences, tmp_path, capsys):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from syntaxformer.cli import main

    sentences = ptb_sentences[:30]
    text = tmp_path / "test.txt"
    # raw text in capitals and with digits: the CLI normalises it as the training corpus was
    text.write_text(
        "\n".join(" ".join(w.upper() if w != "N" else "1987" for w in s) for s in sentences) + "\n", encoding="utf-8"
    )
    assert main(["perplexity", "--model", str(trained_tiny), "--corpus", str(text), "--json", "--seed", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    expected = masked_lm_perplexity(
        AutoModelForMaskedLM.from_pretrained(trained_tiny), AutoTokenizer.from_pretrained(trained_tiny), sentences
    )
    for key in ("n_tokens", "n_unk", "n_sentences", "vocab_size", "protocol"):
        assert report[key] == expected[key], key
    assert report["perplexity"] == pytest.approx(expected["perplexity"], rel=1e-5)
    assert (report["data"], report["seed"], report["preset"]) == (str(text), 3, "tiny")
    assert report["model_type"] == "tree-transformer"


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_control_has_the_fewest_layers_reaching_the_tree_transformers_parameters(preset):
    from syntaxformer.models import PRESETS
    from syntaxformer.workflows.compare import control_layers, count_parameters

    vocab = 10_004
    tree = count_parameters(preset, vocab, prior="constituent")
    n = control_layers(preset, vocab, tree)
    assert count_parameters(preset, vocab, prior="none", num_hidden_layers=n) >= tree
    assert count_parameters(preset, vocab, prior="none", num_hidden_layers=n - 1) < tree
    # the prior's neighbouring attention adds parameters: the control is deeper than the tree model
    assert n > PRESETS["tree-transformer"][preset]["num_hidden_layers"]


def test_compare_trains_three_models_with_the_same_steps_and_reuses_finished_runs(ptb_sentences, tmp_path):
    from syntaxformer.cli import main
    from syntaxformer.workflows.compare import compare

    train_file, test_file = tmp_path / "train.txt", tmp_path / "test.txt"
    train_file.write_text("\n".join(" ".join(s) for s in ptb_sentences[:150]) + "\n")
    test_file.write_text("\n".join(" ".join(s) for s in ptb_sentences[150:170]) + "\n")
    report = compare(
        str(train_file),
        str(test_file),
        tmp_path / "out",
        preset="tiny",
        max_steps=5,
        seed=2,
        batch_size=16,
        threads=1,
        quiet=True,
    )
    names = [r["name"] for r in report["runs"]]
    assert names[:2] == ["tree-transformer", "transformer"] and names[2].startswith("transformer-L")
    tree, plain, deep = report["runs"]
    assert [r["steps"] for r in report["runs"]] == [5, 5, 5]
    assert (tree["prior"], plain["prior"], deep["prior"]) == ("constituent", "none", "none")
    assert tree["layers"] == plain["layers"] < deep["layers"] == int(names[2][len("transformer-L") :])
    assert plain["parameters"] < tree["parameters"] <= deep["parameters"]
    words = sum(map(len, ptb_sentences[150:170]))
    assert all(r["n_tokens"] == words for r in report["runs"])
    assert report["best"] == min(report["runs"], key=lambda r: r["perplexity"])["name"]
    assert json.loads((tmp_path / "out" / "compare.json").read_text())["runs"] == report["runs"]
    # the same command again: nothing retrained, the same numbers
    assert (
        main(
            [
                "compare",
                "--corpus",
                str(train_file),
                "--test",
                str(test_file),
                "--preset",
                "tiny",
                "--max-steps",
                "5",
                "--seed",
                "2",
                "--batch-size",
                "16",
                "--threads",
                "1",
                "--quiet",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    again = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert all(r["reused"] for r in again["runs"])
    assert [r["perplexity"] for r in again["runs"]] == pytest.approx(
        [r["perplexity"] for r in report["runs"]], rel=1e-6
    )


def test_perplexity_reads_raw_strings_as_the_parser_does(tiny_model):
    """``perplexity`` takes a string as the parser does (tokenised Penn-Treebank style, punctuation
    dropped, lower-cased, a token with a digit -> N): the same result as the words it gives."""
    from syntaxformer.evaluation.perplexity import perplexity, sentence_words
    from syntaxformer.parsing import load_model

    model, tokenizer, _ = load_model(tiny_model("tree-transformer"), device="cpu")
    text = ["The old man sat on the bench.", "In 1989, prices didn't rise 5%!", "?!"]
    words = [
        ["the", "old", "man", "sat", "on", "the", "bench"],
        ["in", "N", "prices", "did", "n't", "rise", "N", "%"],
        [],
    ]
    assert sentence_words(text) == words
    from_text = perplexity(model, tokenizer, text)
    assert from_text == perplexity(model, tokenizer, words)
    assert (from_text["n_sentences"], from_text["n_empty"], from_text["n_tokens"]) == (2, 1, 15)
    mixed = perplexity(model, tokenizer, [text[0], words[1]])  # strings and word lists together
    assert mixed["perplexity"] == from_text["perplexity"]
    with pytest.raises(InputError, match=r"^sentence 2: expected a string or a list of word strings, got int: 7$"):
        perplexity(model, tokenizer, [text[0], 7])
