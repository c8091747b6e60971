"""Natural-language inference: readers, the Gaussian Transformer pair classifier and
its baseline, the scores, the trainer (selection, resume) and the ``nli`` command."""

from __future__ import annotations

import json
import math
import zlib

import pytest
import torch
from helpers import SICK_PAIRS as PAIRS  # the sick_file fixture (conftest.py) writes these pairs
from helpers import sick_line

from syntaxformer.cli import main
from syntaxformer.data.nli import (
    LABELS,
    NliPair,
    PairEncoder,
    char_ngram_ids,
    char_ngrams,
    load_nli,
    load_nli_split,
    tokenize_sentence,
)
from syntaxformer.errors import InputError
from syntaxformer.evaluation.classification import classification_scores, majority_class_scores
from syntaxformer.models import PAIR_MODELS
from syntaxformer.models.gaussian_transformer import scaled_sum

# ------------------------------------------------------------------------------------------ readers


def test_tokenize_sentence():
    assert tokenize_sentence("A man's dog isn't black, really.") == (
        "a",
        "man",
        "'s",
        "dog",
        "is",
        "n't",
        "black",
        ",",
        "really",
        ".",
    )


def test_sick_on_the_real_file(shared_data):
    data = load_nli(str(shared_data / "sick" / "SICK.txt"))  # skips, naming the folder, where SICK is absent
    record = data.record()["splits"]
    assert [record[s]["pairs"] for s in ("train", "valid", "test")] == [4439, 495, 4906]
    assert record["test"]["labels"] == {"entailment": 1404, "neutral": 2790, "contradiction": 712}
    assert data.train[0].premise[:4] == ("a", "group", "of", "kids") and data.train[0].label == LABELS.index("neutral")
    majority = majority_class_scores([p.label for p in data.train], [p.label for p in data.test], LABELS)
    assert majority["class"] == "neutral" and majority["accuracy"] == pytest.approx(100 * 2790 / 4906)


def test_sick_format_is_recognised_by_its_header(sick_file):
    data = load_nli(str(sick_file))
    assert (len(data.train), len(data.valid), len(data.test)) == (6, 3, 3) and data.format == "sick"
    assert data.train[1] == NliPair(
        ("a", "man", "is", "playing", "a", "guitar"), ("nobody", "is", "playing", "a", "guitar"), 2, "2"
    )
    pairs, description = load_nli_split(str(sick_file), "trial")
    assert len(pairs) == 3 and description["split"] == "SICK TRIAL (official split)"


@pytest.mark.parametrize(
    "line, message",
    [
        ("13\tA man\tA woman\tNEUTRAL\tTEST", "5 tab-separated fields, the header has 12"),
        (sick_line(13, "a man", "a woman", "MAYBE", "TEST"), "unknown label 'MAYBE'"),
        (sick_line(13, "a man", " ", "NEUTRAL", "TEST"), "empty hypothesis"),
        (sick_line(13, "a man", "a woman", "NEUTRAL", "DEV"), "unknown SemEval_set 'DEV'"),
    ],
)
def test_sick_bad_lines_name_file_and_line(sick_file, line, message):
    sick_file.write_bytes(sick_file.read_bytes() + b"\r\n" + line.encode())
    with pytest.raises(InputError) as e:
        load_nli(str(sick_file))
    assert f"{sick_file}:14: " in str(e.value) and message in str(e.value)


def test_jsonl_snli_fields_skip_dash_labels_and_count_them(tmp_path):
    path = tmp_path / "snli.jsonl"
    rows = [dict(sentence1=a, sentence2=b, gold_label=label.lower()) for a, b, label in PAIRS * 4]
    rows[3]["gold_label"] = "-"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = load_nli(str(path), test=str(path))
    assert data.format == "jsonl" and data.skipped == dict(train=1, test=1)
    assert len(data.train) + len(data.valid) == 23 and len(data.valid) == 1 and len(data.test) == 23


def test_tsv_premise_hypothesis_label(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("label\tpremise\thypothesis\n" + "".join(f"{c}\t{a}\t{b}\n" for a, b, c in PAIRS))
    pairs, description = load_nli_split(str(path), "all")
    assert [p.label for p in pairs] == [0, 2, 1, 0, 2, 1] and description["format"] == "tsv"
    assert pairs[3].hypothesis == ("a", "dog", "runs")


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "a.jsonl",
            '{"premise": "a b", "hypothesis": "c", "label": "neutral"}\n{"premise": "a"\n',
            ":2: not a JSON object",
        ),
        (
            "b.jsonl",
            '{"premise": "a b", "hypothesis": "c", "label": "neutral"}\n{"premise": "a", "label": "x"}\n',
            ":2: no fields premise/hypothesis/label or sentence1/sentence2/gold_label",
        ),
        (
            "c.jsonl",
            '{"premise": "a b", "hypothesis": "c", "label": "neutral"}\n'
            '{"premise": "a", "hypothesis": "b", "label": "yes"}\n',
            ":2: unknown label 'yes'",
        ),
        ("d.tsv", "premise\thypothesis\tlabel\na\tb\tneutral\na\tb\n", ":3: 2 tab-separated fields, the header has 3"),
        ("e.tsv", "premise\thypothesis\tlabel\n...\t\tneutral\n", ":2: empty hypothesis"),
    ],
)
def test_generic_bad_lines(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_nli_split(str(path), "all")


# ------------------------------------------------------------------------------------------ inputs, scores


def test_char_ngrams_and_their_stable_ids():
    assert char_ngrams("dog", [3, 4]) == ["<do", "dog", "og>", "<dog", "dog>"]
    assert char_ngrams("a", [5]) == ["<a>"]
    assert char_ngram_ids("dog", [3], 1000) == [zlib.crc32(g.encode()) % 1000 + 1 for g in ("<do", "dog", "og>")]


def test_classification_scores_exact():
    gold = [0, 0, 0, 1, 1, 2]
    predicted = [0, 0, 1, 1, 1, 1]
    s = classification_scores(gold, predicted, LABELS)
    assert s["accuracy"] == pytest.approx(400 / 6)
    assert s["confusion"]["matrix"] == [[2, 1, 0], [0, 2, 0], [0, 1, 0]]
    assert s["per_class"]["entailment"] == dict(
        precision=100.0, recall=pytest.approx(200 / 3), f1=80.0, support=3, predicted=2
    )
    assert s["per_class"]["neutral"]["precision"] == 50.0 and s["per_class"]["neutral"]["recall"] == 100.0
    assert s["per_class"]["contradiction"]["precision"] is None and s["per_class"]["contradiction"]["recall"] == 0.0


# ------------------------------------------------------------------------------------------ models


class _Tokenizer:
    """A word vocabulary with the project's special ids ([PAD] 0, [UNK] 1)."""

    pad_token_id, unk_token_id = 0, 1

    def __init__(self, words):
        self._vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(sorted(words))}}

    def get_vocab(self):
        return dict(self._vocab)


def _pairs():
    return [NliPair(tuple(a.split()), tuple(b.split()), LABELS.index(c.lower())) for a, b, c in PAIRS]


def _model(name="gaussian-transformer", **fields):
    entry = PAIR_MODELS[name]
    tokenizer = _Tokenizer({w for p in _pairs() for w in p.premise + p.hypothesis})
    torch.manual_seed(0)
    config = entry.config_class(
        vocab_size=len(tokenizer.get_vocab()), **{**entry.pair_classifier.presets["tiny"], **fields}
    )
    return entry.pair_classifier.model_class(config).eval(), PairEncoder(tokenizer, config)


@pytest.mark.parametrize(
    "name, prior",
    [
        ("gaussian-transformer", "gaussian"),
        ("gaussian-transformer", "none"),
        ("gaussian-transformer", "constituent"),
        ("mean-pool", None),
    ],
)
def test_padding_invariance(name, prior):
    model, encoder = _model(name, **({"prior": prior} if prior else {}))
    pairs = _pairs()
    with torch.no_grad():
        together = model(**encoder.batch(pairs)).logits
        alone = torch.cat([model(**encoder.batch([p])).logits for p in pairs])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


def test_gaussian_with_w_to_zero_and_b_zero_is_the_plain_twin():
    gaussian, encoder = _model(prior="gaussian", gaussian_w_init=1e-12, gaussian_b_init=0.0)
    plain, _ = _model(prior="none")
    state = {k: v for k, v in gaussian.state_dict().items() if ".gaussian." not in k}
    plain.load_state_dict(state)
    batch = encoder.batch(_pairs())
    with torch.no_grad():
        torch.testing.assert_close(gaussian(**batch).logits, plain(**batch).logits, atol=1e-5, rtol=1e-5)


def test_pooling_and_shared_encoder():
    v = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[True, True, False]])
    torch.testing.assert_close(scaled_sum(v, mask), torch.tensor([[4.0, 6.0]]) / math.sqrt(2))
    model, encoder = _model()
    p = _pairs()[0]
    batch = encoder.batch([p])
    with torch.no_grad():
        x = model.encode(batch["premise_ids"], batch["premise_mask"].bool(), batch["premise_char_ids"])
        swapped = encoder.batch([NliPair(p.hypothesis, p.premise, p.label)])
        y = model.encode(swapped["hypothesis_ids"], swapped["hypothesis_mask"].bool(), swapped["hypothesis_char_ids"])
    torch.testing.assert_close(x, y)  # one encoder for both sentences


def test_zero_residual_init_starts_as_the_embedding_and_comparison_path():
    model, encoder = _model(residual_init="zero")
    p = encoder.batch(_pairs()[:2])
    mask = p["premise_mask"].bool()
    e = model.embeddings(p["premise_ids"], p["premise_char_ids"])
    x = model.encode(p["premise_ids"], mask, p["premise_char_ids"])
    torch.testing.assert_close(x, model.encoder_norm(e))  # the encoding block passes its input through
    other = model.encode(p["hypothesis_ids"], p["hypothesis_mask"].bool(), p["hypothesis_char_ids"])
    torch.testing.assert_close(model.interact(x, other, p["hypothesis_mask"].bool()), model.interaction_norm(x))
    # ... and it learns: the zeroed projections get gradients once the classifier is not zero
    torch.nn.init.normal_(model.classifier.out.weight)
    model(**encoder.batch(_pairs())).loss.backward()  # the batch carries the labels
    for layer in (*model.encoder, *model.interaction):
        assert layer.attention.output.weight.grad.abs().sum() > 0 and layer.ffn.fc_out.weight.grad.abs().sum() > 0
    xavier, _ = _model()
    assert xavier.encoder[0].attention.output.weight.abs().sum() > 0
    with pytest.raises(ValueError, match="residual_init"):
        _model(residual_init="ones")


@pytest.mark.parametrize("name", ["gaussian-transformer", "mean-pool"])
def test_untrained_model_predicts_uniform(name):
    model, encoder = _model(name)
    with torch.no_grad():
        out = model(**encoder.batch(_pairs()))
    torch.testing.assert_close(out.logits, torch.zeros_like(out.logits))
    assert out.loss.item() == pytest.approx(math.log(3))


def test_recipe_fields_follow_the_model():
    from syntaxformer.workflows.nli import resolve_nli_recipe

    fields = resolve_nli_recipe("default", 4439, "mean-pool", overrides={"hidden_size": 16}, lr=None)
    assert fields["overrides"] == {"hidden_dropout_prob": 0.1, "hidden_size": 16}
    assert fields["max_steps"] == 36 * 139 and fields["lr"] == 1e-3
    assert resolve_nli_recipe("default", 4439)["overrides"]["classifier_features"] == "match"


def test_interaction_sees_the_whole_other_sentence_and_predictions_keep_their_order():
    from syntaxformer.workflows.nli import predict_pairs

    model, encoder = _model()
    p = _pairs()[0]
    changed = NliPair(p.premise, p.hypothesis[:-1] + ("onion",), p.label)
    with torch.no_grad():

        def aligned(pair):
            b = encoder.batch([pair])
            x = model.encode(
                torch.cat([b["premise_ids"], b["hypothesis_ids"]]),
                torch.cat([b["premise_mask"], b["hypothesis_mask"]]).bool(),
                torch.cat([b["premise_char_ids"], b["hypothesis_char_ids"]]),
            )
            return model.interact(x[:1], x[1:], b["hypothesis_mask"].bool())[0, 0]  # the premise's first word

        assert not torch.allclose(aligned(p), aligned(changed))  # no causal mask: the last word is seen
    model.classifier.out.weight.data.normal_()
    pairs = _pairs()
    tokenizer = _Tokenizer({w for q in pairs for w in q.premise + q.hypothesis})  # _model's vocabulary
    predictions, timing = predict_pairs(model, tokenizer, pairs, batch_size=2)
    with torch.no_grad():
        expected = [int(model(**encoder.batch([q])).logits.argmax()) for q in pairs]
    assert predictions == expected and timing["pairs"] == 6


def test_save_load_and_auto_class(tmp_path):
    from transformers import AutoModelForSequenceClassification

    model, encoder = _model(prior="constituent", classifier_features="match")
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model) and loaded.config.prior == "constituent"
    batch = encoder.batch(_pairs())
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)


def test_frozen_word_vectors_stay_fixed():
    model, encoder = _model(freeze_word_embeddings=True)
    vocab = len(encoder.vocab)
    vectors = torch.randn(vocab, model.config.word_embedding_dim)
    found = torch.ones(vocab, dtype=torch.bool)
    found[1] = False  # [UNK] has no vector: rescaled random row
    model.set_word_vectors(vectors, found)
    table = model.embeddings.word_embeddings.weight
    torch.testing.assert_close(table[2:], vectors[2:])
    assert torch.all(table[0] == 0)
    before = table.detach().clone()
    model.train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model(**encoder.batch(_pairs())).loss.backward()
    optimizer.step()
    assert torch.equal(table, before) and not table.requires_grad


# ------------------------------------------------------------------------------------------ training, command


def _train_args(sick_file, out, **kw):
    from syntaxformer.tasks.nli import NliTrainArguments

    return NliTrainArguments(
        out=str(out),
        data=str(sick_file),
        preset="tiny",
        batch_size=2,
        lr=1e-3,
        warmup_steps=2,
        schedule="linear",
        max_steps=kw.pop("max_steps", 6),
        seed=3,
        quiet=True,
        **kw,
    )


def test_resume_equals_an_uninterrupted_run(sick_file, tmp_path):
    from syntaxformer.tasks.nli import NliTrainer

    whole = NliTrainer(_train_args(sick_file, tmp_path / "whole"))
    whole.train()
    first = NliTrainer(_train_args(sick_file, tmp_path / "cut", max_steps=4, schedule_steps=6))
    first.train()
    second = NliTrainer(_train_args(sick_file, tmp_path / "cut", max_steps=6, schedule_steps=6, resume=True))
    second.train()
    assert second.state.resumed_from == [4] and second.state.step == 6
    # the uninterrupted run decays over max_steps = 6: the same schedule
    for (name, a), b in zip(whole.model.state_dict().items(), second.model.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)
    record = json.loads((tmp_path / "cut" / "training.json").read_text())
    assert record["steps"] == 6 and record["selection"]["history"][0][0] == 0
    assert (tmp_path / "cut" / "best" / "model.safetensors").is_file()


def test_nli_command_train_and_evaluate(sick_file, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(
            [
                "nli",
                "train",
                "--corpus",
                str(sick_file),
                "--recipe",
                "tiny",
                "--max-steps",
                "3",
                "--batch-size",
                "2",
                "--out",
                str(out),
                "--seed",
                "1",
                "--quiet",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 3 and report["seed"] == 1 and report["prior"] == "gaussian"
    assert report["scores"]["test"]["n"] == 3 and report["scores"]["valid"]["n"] == 3
    assert sum(map(sum, report["scores"]["test"]["confusion"]["matrix"])) == 3
    assert json.loads((out / "report.json").read_text())["selected_step"] == report["selected_step"]
    assert main(["nli", "evaluate", "--model", str(out / "best"), "--corpus", str(sick_file), "--split", "trial"]) == 0
    text = capsys.readouterr().out
    assert "SICK TRIAL (official split), 3 pairs" in text and "gold \\ predicted" in text


def test_nli_command_unknown_field(sick_file, tmp_path, capsys):
    assert (
        main(
            [
                "nli",
                "train",
                "--corpus",
                str(sick_file),
                "--recipe",
                "tiny",
                "--architecture",
                "mean-pool",
                "--set",
                'classifier_features="match"',
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 1
    )
    assert (
        capsys.readouterr().err.strip() == "syntaxformer nli: error: mean-pool has no config field classifier_features"
    )


def test_nli_command_bad_input_is_one_line(sick_file, tmp_path, capsys):
    sick_file.write_bytes(sick_file.read_bytes() + b"\r\n13\tA man\tA woman")
    assert main(["nli", "train", "--corpus", str(sick_file), "--recipe", "tiny", "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"syntaxformer nli: error: {sick_file}:14: 3 tab-separated fields, the header has 12"


def test_word2vec_is_deterministic_and_read_back(tmp_path):
    from syntaxformer.data.word_vectors import read_word_vectors, train_word2vec

    text = tmp_path / "text.txt"
    text.write_text("\n".join(f"{a} <unk>\n{b}" for a, b, _ in PAIRS * 5) + "\n")
    for name in ("a.kv", "b.kv"):
        report = train_word2vec([text], tmp_path / name, dim=8, min_count=1, epochs=2, seed=4)
    words_a, a = read_word_vectors(tmp_path / "a.kv")
    words_b, b = read_word_vectors(tmp_path / "b.kv")
    assert words_a == words_b and (a == b).all() and "<unk>" not in words_a and report["vocabulary"] == len(words_a)
    vectors = tmp_path / "v.txt"
    vectors.write_text("2 3\nman 0.1 0.2 0.3\ndog 1 2 3\n")
    words, matrix = read_word_vectors(vectors)
    assert words == ["man", "dog"] and matrix.tolist()[1] == [1.0, 2.0, 3.0]
    vectors.write_text("2 3\nman 0.1 0.2\n")
    with pytest.raises(InputError, match=r"v.txt:2: 2 numbers, the header says 3"):
        read_word_vectors(vectors)


# ------------------------------------------------------------------------------------------ the loop's selection, bf16


def _selection_args(sick_file, out, **kw):
    from syntaxformer.tasks.nli import NliTrainArguments

    return NliTrainArguments(
        out=str(out),
        data=str(sick_file),
        preset="tiny",
        batch_size=2,
        lr=3e-3,
        eval_every=2,
        seed=3,
        quiet=True,
        **{"max_steps": 12, "warmup_steps": 2, "schedule": "linear", **kw},
    )


def test_the_selected_model_is_kept_and_final_model_best_leaves_it_in_out(sick_file, tmp_path):
    from safetensors.torch import load_file

    from syntaxformer.tasks.nli import NliTrainer

    out = tmp_path / "run"
    trainer = NliTrainer(_selection_args(sick_file, out, final_model="best"))  # no keep_best needed
    trainer.train()
    selection = json.loads((out / "training.json").read_text())["selection"]
    step, _, _, accuracy = max(selection["history"], key=lambda row: row[3])  # the earliest of the best
    assert [row[0] for row in selection["history"]] == [0, 2, 3, 4, 6, 8, 9, 10, 12]  # every 2 steps, epoch ends
    assert (selection["best_step"], selection["best_valid_accuracy"]) == (step, accuracy) and 0 < step < 12
    assert json.loads((out / "best" / "best.json").read_text()) == {"step": step, "valid_accuracy": accuracy}
    saved, kept = load_file(out / "model.safetensors"), load_file(out / "best" / "model.safetensors")
    assert saved.keys() == kept.keys() and all(torch.equal(saved[k], kept[k]) for k in kept)
    last = trainer.model.state_dict()
    assert not all(torch.equal(last[k], saved[k]) for k in saved)


def test_the_plateau_schedule_moves_on_the_selection_accuracy(sick_file, tmp_path):
    """``--schedule plateau``: every evaluation's selection accuracy goes to the schedule (torch's rule,
    patience 0, factor 0.5): the learning rate halves after each evaluation that does not raise the best."""
    import torch.optim.lr_scheduler as schedulers

    from syntaxformer.tasks.nli import NliTrainer

    args = _selection_args(sick_file, tmp_path / "plateau", schedule="plateau", warmup_steps=0, plateau_patience=0)
    trainer = NliTrainer(args)
    trainer.train()
    accuracies = [
        row[3] for row in json.loads((tmp_path / "plateau" / "training.json").read_text())["selection"]["history"]
    ]
    rule = schedulers.ReduceLROnPlateau(
        torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=3e-3), "max", 0.5, 0, 0.0
    )
    for accuracy in accuracies:  # every evaluation, step 0's and the last step's (12, an eval_every step) too
        rule.step(accuracy)
    assert len(accuracies) > 3 and trainer.optimizer.param_groups[0]["lr"] == rule.optimizer.param_groups[0]["lr"]
    assert trainer.optimizer.param_groups[0]["lr"] < 3e-3


def test_nli_bf16_trains_and_selects_under_autocast(sick_file, tmp_path, capsys):
    from safetensors.torch import load_file

    from syntaxformer.tasks.nli import NliTrainer

    seen = []

    class Hooked(NliTrainer):
        def _build_model(self, vectors=None):
            super()._build_model(vectors)
            for module in self.model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.register_forward_hook(
                        lambda m, i, o: seen.append((m.training, torch.is_autocast_enabled("cpu"), o.dtype))
                    )

    out = tmp_path / "bf16"
    Hooked(_selection_args(sick_file, out, max_steps=2, bf16=True)).train()
    training, validation = [s for s in seen if s[0]], [s for s in seen if not s[0]]
    assert training and validation
    assert all(autocast and dtype == torch.bfloat16 for _, autocast, dtype in seen)
    assert {t.dtype for t in load_file(out / "model.safetensors").values()} == {torch.float32}
    # the command's flag
    argv = ["nli", "train", "--corpus", str(sick_file), "--recipe", "tiny", "--max-steps", "2", "--batch-size", "2"]
    assert main([*argv, "--bf16", "--out", str(tmp_path / "cli"), "--quiet", "--json"]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "cli" / "training.json").read_text())["arguments"]["bf16"] is True
