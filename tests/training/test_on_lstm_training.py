"""ON-LSTM in the commands: the causal-LM objective through the one trainer
(validation loss = the literal next-word cross-entropy, checkpoints, resume = uninterrupted,
TensorBoard), next-word perplexity in the one evaluator, per-layer distances with ``--layer``,
``induce --architecture on-lstm`` and ``show``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from syntaxformer.cli import main
from syntaxformer.data.corpus import load_corpus
from syntaxformer.data.embedded import ptb_sample_members
from syntaxformer.data.preprocess import load_gold_trees
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.decoding.spans import labelled_spans, split_by_distance
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, make_config
from syntaxformer.models.on_lstm import OnLstmForCausalLM
from syntaxformer.parsing import DecoderOptions, load_model, model_structures
from syntaxformer.structures import SyntacticDistances
from syntaxformer.tasks.run import train
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.objectives import CausalLM, MaskedLM, build_objective

torch.set_num_threads(1)

TINY = dict(
    model="on-lstm",
    preset="tiny",
    batch_size=16,
    lr=1e-2,
    warmup_steps=3,
    schedule="linear",
    save_every=4,
    eval_every=6,
    log_every=3,
    threads=1,
    quiet=True,
    seed=3,
)
N_STEPS = 12


def _record(folder) -> dict:
    return json.loads((Path(folder) / "training.json").read_text())


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    """The first 300 ptb-sample sentences as a text file (one sentence per line)."""
    path = tmp_path_factory.mktemp("corpus") / "ptb-sample-300.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample")[:300]) + "\n")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, small_corpus) -> Path:
    """An uninterrupted tiny ON-LSTM run of N_STEPS steps."""
    return train(
        out=str(tmp_path_factory.mktemp("onlstm-reference")),
        corpus=str(small_corpus),
        max_steps=N_STEPS,
        schedule_steps=N_STEPS,
        **TINY,
    )


# ------------------------------------------------------------------------------------ the objective


def test_causal_lm_batches_frame_sentences_and_label_every_next_token():
    tok = build_word_tokenizer([["a", "b", "c", "d", "e", "f", "g", "h"]])  # ids 0-11
    objective = build_objective(OnLstmForCausalLM, TrainArguments(out="x", max_steps=1), tok, [0, 2, 3])
    assert isinstance(objective, CausalLM) and objective.name == "causal-lm"
    batch = objective.batch([[5, 6, 7], [8], [3, 9]], torch.Generator())
    ids, am, labels = batch.input_ids, batch.attention_mask, batch.labels
    assert ids.tolist() == [[3, 5, 6, 7, 3], [3, 8, 3, 0, 0], [3, 9, 3, 0, 0]]  # [CLS] given once
    assert am.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 0, 0]]
    assert labels.tolist() == [[3, 5, 6, 7, 3], [3, 8, 3, -100, -100], [3, 9, 3, -100, -100]]
    assert objective.n_targets(labels) == 4 + 2 + 2  # the words and each sentence's end
    # the model's loss is the mean cross-entropy of exactly those 8 next-token predictions
    torch.manual_seed(0)
    model = OnLstmForCausalLM(
        make_config("on-lstm", "tiny", len(tok), dropout=0, dropouth=0, dropouti=0, wdrop=0)
    ).eval()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=am, labels=labels)
        losses = [
            F.cross_entropy(model(torch.tensor([row[:n]])).logits[0, :-1], torch.tensor(row[1:n]), reduction="sum")
            for row, n in zip(ids.tolist(), am.sum(1).tolist())
        ]
    assert float(out.loss) == pytest.approx(float(sum(losses)) / 8, abs=1e-6)
    # a masked-LM model gets the masking objective; the trainer no longer refuses the causal LM
    assert isinstance(
        build_objective(MODELS["tree-transformer"], TrainArguments(out="x", max_steps=1), tok, [0, 2, 3]), MaskedLM
    )
    TrainArguments(out="x", model="on-lstm", preset="tiny", max_steps=1).check()


def test_training_records_the_next_word_losses(reference, small_corpus):
    from syntaxformer.tasks.language_model_data import prepare_data

    record = _record(reference)
    assert record["objective"] == "causal-lm" and record["steps"] == N_STEPS
    losses = [loss for _, loss in record["valid_history"]]  # steps 0, 6, 12
    assert losses == sorted(losses, reverse=True) and losses[-1] < losses[0] - 0.2, losses
    assert record["final_valid_perplexity"] == pytest.approx(math.exp(record["final_valid_loss"]))
    model, tok, info = load_model(reference)
    assert type(model) is OnLstmForCausalLM and model.config.parse_prefix_token_id == CausalLM.BOUNDARY_ID
    # the validation loss is the literal mean next-word cross-entropy over the held-out sentences
    args = TrainArguments(
        out=str(reference),
        corpus=str(small_corpus),
        max_steps=1,
        **{k: v for k, v in TINY.items() if k not in ("max_steps",)},
    )
    valid = prepare_data(args, reference).valid_ids
    total = n = 0
    with torch.no_grad():
        for ids in valid:
            framed = torch.tensor([CausalLM.frame(ids)])
            total += float(F.cross_entropy(model(framed).logits[0, :-1], framed[0, 1:], reduction="sum"))
            n += framed.shape[1] - 1
    assert record["final_valid_loss"] == pytest.approx(total / n, abs=1e-5)
    # TensorBoard has the validation loss and perplexity
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(reference / "tensorboard"))
    events.Reload()
    assert {"valid/loss", "valid/perplexity", "train/loss"} <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("valid/perplexity")] == [0, 6, 12]


def test_resume_equals_an_uninterrupted_run(tmp_path, small_corpus, reference):
    out = tmp_path / "resumed"
    kw = dict(TINY, corpus=str(small_corpus), schedule_steps=N_STEPS)
    train(out=str(out), max_steps=5, **kw)  # a checkpoint at the stop (step 5)
    assert torch.load(out / "checkpoint.pt", weights_only=False)["state"]["step"] == 5
    with pytest.raises(InputError, match="--resume"):
        train(out=str(out), max_steps=N_STEPS, **kw)
    train(out=str(out), max_steps=N_STEPS, resume=True, **kw)
    record = _record(out)
    assert record["resumed_from_steps"] == [5] and record["steps_this_run"] == N_STEPS - 5
    ref, got = load_file(str(reference / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert ref.keys() == got.keys()
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=0, atol=1e-6, msg=k)
    # the first run's evaluation at its stop (step 5) is not in the checkpoint: the reference's history
    reference_history = _record(reference)["valid_history"]
    assert [s for s, _ in record["valid_history"]] == [s for s, _ in reference_history] == [0, 6, 12]
    for (_, value), (_, expected) in zip(record["valid_history"], reference_history):
        assert value == pytest.approx(expected, abs=1e-6)


# ------------------------------------------------------------------------------------ perplexity


def test_next_word_perplexity_is_the_literal_mean_and_names_its_protocol():
    from syntaxformer.evaluation.perplexity import (
        NEXT_WORD_PROTOCOL,
        PROTOCOL,
        masked_lm_perplexity,
        next_word_perplexity,
        perplexity,
    )

    sentences = [["the", "cat", "sat"], ["a", "dog"], ["the", "dog", "sat", "on", "a", "mat", "today"], ["yes"]]
    tok = build_word_tokenizer(sentences[:2])
    torch.manual_seed(0)
    model = OnLstmForCausalLM(make_config("on-lstm", "tiny", len(tok))).eval()
    words_total = ends_total = 0.0
    for words in sentences:
        ids = torch.tensor([[3] + tok.convert_tokens_to_ids(words) + [3]])
        with torch.no_grad():
            losses = F.cross_entropy(model(ids).logits[0, :-1], ids[0, 1:], reduction="none")
        words_total += float(losses[:-1].sum())
        ends_total += float(losses[-1])
    n_words = sum(map(len, sentences))
    for batch_tokens in (6, 4096):  # batching and padding change nothing
        r = perplexity(model, tok, sentences, batch_tokens=batch_tokens)
        assert r["protocol"] == NEXT_WORD_PROTOCOL and r["protocol"].startswith("next-word")
        assert (r["n_words"], r["n_tokens"], r["n_sentences"]) == (n_words, n_words + 4, 4)
        assert r["n_unk"] == 4  # on, mat, today, yes
        assert r["perplexity"] == pytest.approx(math.exp((words_total + ends_total) / (n_words + 4)), rel=1e-5)
        assert r["word_perplexity"] == pytest.approx(math.exp(words_total / n_words), rel=1e-5)
    with pytest.raises(InputError, match="masked-LM perplexity does not apply"):
        masked_lm_perplexity(model, tok, sentences)
    tt = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", len(tok))).eval()
    with pytest.raises(InputError, match="needs a causal LM"):
        next_word_perplexity(tt, tok, sentences)
    assert perplexity(tt, tok, sentences)["protocol"] == PROTOCOL


def test_cli_perplexity_of_an_on_lstm_folder(reference, small_corpus, capsys):
    assert main(["perplexity", "--model", str(reference), "--corpus", str(small_corpus), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["protocol"].startswith("next-word") and result["model_type"] == "on-lstm"
    assert result["n_sentences"] == 300 and result["n_tokens"] == result["n_words"] + 300
    assert main(["perplexity", "--model", str(reference), "--corpus", str(small_corpus)]) == 0
    table = capsys.readouterr().out
    assert "next-word perplexity" in table and "word perplexity (words only)" in table


# ------------------------------------------------------------------------------------ distances per layer


def test_distances_of_every_layer_and_the_layer_option():
    layers = np.array([[0.1, 0.9, 0.2, 0.3], [0.8, 0.1, 0.2, 0.7], [0.1, 0.2, 0.3, 0.9]])
    d = SyntacticDistances.of_layers(layers, 1)
    assert d.layer == 1 and d.num_layers == 3 and np.array_equal(d.distances, layers[1])
    # the top-down split at the largest gap (worked by hand), of the default row or the row asked for
    assert d.spans() == d.spans(DecoderOptions(layer=1)) == {(0, 5), (1, 5), (1, 4), (1, 3)}
    assert d.spans(DecoderOptions(layer=0)) == {(0, 5), (0, 2), (2, 5), (2, 4)}
    assert d.spans(DecoderOptions(layer=-1)) == d.spans(DecoderOptions(layer=2)) == {(0, 5), (0, 4), (0, 3), (0, 2)}
    assert SyntacticDistances.of_layers(layers, -1).layer == 2
    assert set(d.decoders()) == {"distance", "layer0", "layer1", "layer2"}
    assert d.decoders()["layer0"]() == d.spans(DecoderOptions(layer=0))
    assert d.to_json()["distance_layer"] == 1 and len(d.to_json()["layer_distances"]) == 3
    with pytest.raises(InputError, match="--layer 3 out of range"):
        d.spans(DecoderOptions(layer=3))
    with pytest.raises(InputError, match="--min-layer"):
        d.spans(DecoderOptions(min_layer=0))
    with pytest.raises(InputError, match="one row of syntactic distances"):
        SyntacticDistances(layers[0]).spans(DecoderOptions(layer=0))  # StructFormer: no layers


# ------------------------------------------------------------------------------------ induce and show


@pytest.fixture(scope="module")
def small_treebank(tmp_path_factory):
    """The first 4 files of ptb-sample as one .mrg file, and their words as a training corpus."""
    folder = tmp_path_factory.mktemp("small-treebank")
    mrg = folder / "small.mrg"
    mrg.write_text("\n".join(text for _, text in ptb_sample_members("combined")[:4]), encoding="utf-8")
    text = folder / "small.txt"
    text.write_text("".join(" ".join(t.leaves()) + "\n" for t in load_gold_trees(mrg)), encoding="utf-8")
    return mrg, text


def test_induce_on_lstm_parses_the_chosen_layer(capsys, small_treebank, tmp_path):
    mrg, text = small_treebank
    gold = load_gold_trees(mrg)
    tiny = [
        "--architecture",
        "on-lstm",
        "--treebank",
        str(mrg),
        "--corpus",
        str(text),
        "--preset",
        "tiny",
        "--max-steps",
        "3",
        "--threads",
        "1",
        "--quiet",
    ]
    # decoder options that do not apply are refused before any training
    for flags, message in (
        (["--layer", "3"], "--layer 3 out of range"),
        (["--min-layer", "0"], "--min-layer"),
        (["--descend-rule", "official"], "--descend-rule"),
    ):
        assert main(["induce", *tiny, "--out", str(tmp_path / "refused"), *flags]) == 1
        assert message in capsys.readouterr().err
        assert not (tmp_path / "refused").exists()
    assert main(["induce", *tiny, "--out", str(tmp_path / "run"), "--layer", "2"]) == 0
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["model"] == "on-lstm" and report["decoder"]["layer"] == 2 and report["training"]["steps"] == 3
    assert set(report["single_layer"]) == {"0", "1", "2"}
    assert report["on_lstm"]["sentence_f1"] == pytest.approx(report["single_layer"]["2"]["sentence_f1"])
    assert set(report["curve"]["points"][0]["scores"]) == {"distance", "layer0", "layer1", "layer2"}
    assert "on-lstm" in capsys.readouterr().out
    # the trees are the top-down split of layer 2's distances of the saved model
    model, tok, _ = load_model(tmp_path / "run" / "model")
    trees = (tmp_path / "run" / "trees.txt").read_text().splitlines()
    words = [g.leaves() for g in gold]
    for s, line in zip(model_structures(model, tok, words[:30]), trees):
        from nltk import Tree

        spans = {(i, j) for i, j, _ in labelled_spans(Tree.fromstring(line)) if j - i >= 2}  # not preterminals
        assert s.constituency.layer == 1 and spans == split_by_distance(list(s.constituency.layers[2])) | {
            (0, len(s.words))
        }


def test_show_draws_the_distances_of_every_layer(tmp_path, capsys, tiny_model):
    folder = tiny_model("on-lstm")
    assert (
        main(
            [
                "show",
                "--model",
                str(folder),
                "--out",
                str(tmp_path / "a"),
                "--json",
                "--layer",
                "0",
                "the cat sat on the mat",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["decoder"] == "top-down split at the largest syntactic distance, layer 0"
    assert result["heads"] is None and result["attention_layers"] == []
    (entry,) = result["sentences"]
    assert sorted(f.rsplit("/", 1)[-1] for f in entry["files"]) == [
        "s1-distances.png",
        "s1-distances.svg",
        "s1-tree.png",
        "s1-tree.svg",
    ]
    assert main(["show", "--model", str(folder), "--out", str(tmp_path / "b"), "--layers", "0", "a b"]) == 1
    assert "no attention heads" in capsys.readouterr().err


def test_distance_figure_shapes(tmp_path):
    from syntaxformer.figures import plot_syntactic_distances, save_figure

    words = [f"w{i}" for i in range(40)]
    rows = np.random.default_rng(0).random((3, 39))
    paths = save_figure(plot_syntactic_distances(rows, words, "m", parsed=1), tmp_path / "d")
    assert [p.name for p in paths] == ["d.png", "d.svg"] and all(p.stat().st_size > 0 for p in paths)
    save_figure(
        plot_syntactic_distances(torch.tensor(rows[0]), words, parsed=0, layers=["distances"]), tmp_path / "one"
    )  # one row, a torch tensor
    for bad, n_words, parsed in ((rows[:, :38], 40, None), (rows, 40, 3), (rows[:, :0], 1, None)):
        with pytest.raises(ValueError):
            plot_syntactic_distances(bad, words[:n_words], parsed=parsed)
