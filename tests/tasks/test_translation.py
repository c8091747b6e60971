"""The translation task: aligned files, subwords, source trees over pieces, the model's masks and search,
BLEU, averaging, and the commands on a tiny model."""

from __future__ import annotations

import gzip
import json
import math

import pytest
import torch
from sacrebleu.metrics import BLEU

from syntaxformer.cli import main
from syntaxformer.data.parallel import (
    MosesText,
    build_subwords,
    decode_pieces,
    encode_words,
    read_aligned,
)
from syntaxformer.errors import InputError
from syntaxformer.evaluation.bleu import detokenized_bleu, paired_bootstrap, tokenized_bleu
from syntaxformer.models.translation import BOS, EOS, VARIANTS, TranslationModel, translation_config
from syntaxformer.tasks.translation import TranslationArguments, TranslationTrainer
from syntaxformer.tasks.translation_data import encode_pairs, make_batch, piece_structure, wrap_subwords
from syntaxformer.tasks.translator import Translator
from syntaxformer.training.loop import lr_factor

#: 20 sentence pairs (tokenised, lower-cased, as the Multi30k tok/ files)
PAIRS = [
    ("a man is walking .", "ein mann geht ."),
    ("a woman is walking .", "eine frau geht ."),
    ("a dog is running .", "ein hund rennt ."),
    ("two dogs are running .", "zwei hunde rennen ."),
    ("a man is eating .", "ein mann isst ."),
    ("a woman is eating .", "eine frau isst ."),
    ("a child is playing .", "ein kind spielt ."),
    ("two children are playing .", "zwei kinder spielen ."),
    ("a man is sitting on a bench .", "ein mann sitzt auf einer bank ."),
    ("a woman is sitting on a bench .", "eine frau sitzt auf einer bank ."),
    ("a dog is sitting .", "ein hund sitzt ."),
    ("a man rides a bike .", "ein mann fährt fahrrad ."),
    ("a woman rides a horse .", "eine frau reitet ein pferd ."),
    ("the man is smiling .", "der mann lächelt ."),
    ("the woman is smiling .", "die frau lächelt ."),
    ("a girl is jumping .", "ein mädchen springt ."),
    ("a boy is jumping .", "ein junge springt ."),
    ("two men are talking .", "zwei männer unterhalten sich ."),
    ("a man is reading a book .", "ein mann liest ein buch ."),
    ("a woman is reading a book .", "eine frau liest ein buch ."),
]


def _tokenizer():
    return wrap_subwords(build_subwords([s for pair in PAIRS for s in pair], 120))


def _files(folder, pairs, name="train"):
    (folder / f"{name}.en").write_text("".join(s + "\n" for s, _ in pairs))
    (folder / f"{name}.de").write_text("".join(t + "\n" for _, t in pairs))
    return folder / f"{name}.en", folder / f"{name}.de"


# ----------------------------------------------------------------------------------------- reading


def test_aligned_files_of_different_lengths_are_a_one_line_error_naming_both(tmp_path):
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\ntwo\nthree\n")
    tgt.write_text("eins\nzwei\n")
    with pytest.raises(InputError) as e:
        read_aligned(src, tgt)
    assert str(e.value) == f"{src}: 3 lines against 2 in {tgt}: aligned files need one line each"


def test_an_empty_line_and_bad_utf8_name_the_file_and_line(tmp_path):
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\n\nthree\n")
    tgt.write_text("eins\nzwei\ndrei\n")
    with pytest.raises(InputError, match=rf"^{src}:2: empty line"):
        read_aligned(src, tgt)
    src.write_text("one\ntwo\nthree\n")
    tgt.write_bytes(b"eins\nzwei\n\xff drei\n")
    with pytest.raises(InputError, match=rf"^{tgt}:3: not UTF-8 text"):
        read_aligned(src, tgt)


def test_gzipped_files_read_like_plain_ones(tmp_path):
    src, tgt = _files(tmp_path, PAIRS[:3])
    with gzip.open(tmp_path / "g.en.gz", "wt", encoding="utf-8") as f:
        f.write(src.read_text())
    assert read_aligned(tmp_path / "g.en.gz", tgt) == read_aligned(src, tgt)


def test_the_train_command_exits_1_with_the_readers_line(tmp_path, capsys):
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\ntwo\n")
    tgt.write_text("eins\n")
    code = main(
        ["translation", "train", "--out", str(tmp_path / "o"), "--preset", "tiny", "--source", str(src),
         "--target", str(tgt), "--valid-source", str(src), "--valid-target", str(tgt), "--max-steps", "1"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1].endswith(f"{src}: 2 lines against 1 in {tgt}: aligned files need one line each")
    assert "Traceback" not in "\n".join(err)


# ----------------------------------------------------------------------------------------- subwords


def test_subwords_round_trip_and_map_pieces_to_words():
    tok = build_subwords([s for pair in PAIRS for s in pair], 60)  # few merges: words split into pieces
    for source, target in PAIRS:
        for sentence in (source, target):
            ids, word_ids = encode_words(tok, sentence.split())
            assert decode_pieces(tok, ids) == sentence.split()
            assert sorted(set(word_ids)) == list(range(len(sentence.split())))
            assert word_ids == sorted(word_ids)
    ids, word_ids = encode_words(tok, ["unterhalten"])
    assert len(ids) > 1 and word_ids == [0] * len(ids)


def test_subwords_round_trip_on_the_corpus_text(shared_data):
    lines = (shared_data / "multi30k" / "tok" / "val.lc.norm.tok.de").read_text(encoding="utf-8").splitlines()
    tok = build_subwords(lines, 2000)
    assert all(decode_pieces(tok, encode_words(tok, line.split())[0]) == line.split() for line in lines)


def test_moses_detokenisation_round_trips_the_tokens():
    moses = MosesText("de")
    for text in ["Ein Mann fährt Fahrrad, und eine Frau lacht.", "Zwei Hunde (braun) rennen!"]:
        tokens = moses.tokenize(text)
        assert moses.tokenize(moses.detokenize(tokens)) == tokens
    assert MosesText("en").tokenize("A man's bike.") == ["a", "man", "'s", "bike", "."]


# ----------------------------------------------------------------------------------------- trees to pieces


def test_each_piece_takes_its_words_structural_position_and_phrase():
    # "the bikers ride" with "bikers" in two pieces: words 0, 1, 1, 2 and </s>
    word_ids = [0, 1, 1, 2, None]
    heads = [2, 3, 0]  # the -> bikers, bikers -> ride, ride = root (1-based)
    assert piece_structure("heads", heads, word_ids) == [1, 3, 1, -1, -100]
    assert piece_structure("phrase_ids", [0, 0, 1], word_ids) == [0, 0, 0, 1, -1]


def test_encoded_pairs_carry_the_source_structure_over_pieces():
    tok = _tokenizer()
    words = [["a", "man", "is", "walking", "."]]
    pairs = encode_pairs(tok, words, [["ein", "mann", "geht", "."]], "heads", [[2, 3, 0, 3, 3]])
    ids, word_ids = encode_words(tok.backend_tokenizer, words[0])
    assert pairs.source[0] == ids + [EOS]
    assert pairs.structures[0] == piece_structure("heads", [2, 3, 0, 3, 3], word_ids + [None])
    batch = make_batch(pairs, [0])
    assert batch.decoder_input_ids[0, 0] == BOS and batch.labels[0, -1] == EOS
    assert torch.equal(batch.decoder_input_ids[0, 1:], batch.labels[0, :-1])


# ----------------------------------------------------------------------------------------- the model


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_decoder_cannot_see_the_future(variant):
    torch.manual_seed(0)
    model = TranslationModel(translation_config(variant, "tiny", 40)).eval()
    src = torch.tensor([[5, 6, 7, 8, EOS]])
    structure = {"heads": torch.tensor([[1, -1, 1, 1, -100]]), "phrase_ids": torch.tensor([[0, 0, 1, 1, -1]])}
    kind = VARIANTS[variant].structure
    inputs = None if kind is None else {kind: structure[kind]}
    dec = torch.tensor([[BOS, 9, 10, 11, 12]])
    changed = dec.clone()
    changed[0, 3] = 20
    a = model(src, torch.ones_like(src), dec, structure_inputs=inputs).logits
    b = model(src, torch.ones_like(src), changed, structure_inputs=inputs).logits
    assert torch.equal(a[0, :3], b[0, :3])
    assert not torch.allclose(a[0, 3:], b[0, 3:])


def test_the_embedding_table_is_one_parameter_for_source_target_and_output():
    model = TranslationModel(translation_config("baseline", "tiny", 40))
    names = [k for k in model.state_dict() if k.endswith("word_embeddings.weight") or k.endswith("embed_tokens.weight")]
    assert names == [] and model.state_dict()["shared.weight"].shape == (40, 32)
    assert model.encoder.body.embeddings.word_embeddings is model.shared


def test_the_label_smoothed_loss_is_the_formula():
    torch.manual_seed(0)
    model = TranslationModel(translation_config("baseline", "tiny", 30, label_smoothing=0.1)).eval()
    src, dec = torch.tensor([[5, 6, EOS]]), torch.tensor([[BOS, 7, 8]])
    labels = torch.tensor([[7, 8, EOS]])
    out = model(src, torch.ones_like(src), dec, labels=labels)
    logp = out.logits[0].log_softmax(-1)
    expected = (0.9 * -logp[torch.arange(3), labels[0]] + 0.1 * -logp.mean(-1)).mean()
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_inverse_sqrt_schedule():
    assert [lr_factor(s, 4, "inverse-sqrt", None) for s in (0, 1, 3, 4, 15)] == [0.25, 0.5, 1.0, math.sqrt(4 / 5), 0.5]


# ----------------------------------------------------------------------------------------- training and search


@pytest.fixture(scope="module")
def overfit(tmp_path_factory):
    """A tiny model trained on the 20 pairs until it knows them; returns (folder, translator)."""
    folder = tmp_path_factory.mktemp("mt")
    src, tgt = _files(folder, PAIRS)
    args = TranslationArguments(
        out=str(folder / "run"), preset="tiny", source=str(src), target=str(tgt), valid_source=str(src),
        valid_target=str(tgt), vocab_size=120, max_tokens=400, max_steps=300, warmup_steps=30, lr=0.01,
        average_last=1, threads=1, quiet=True, overrides={"dropout": 0.0, "label_smoothing": 0.0},
    )  # fmt: skip
    out = TranslationTrainer(args).train()
    from syntaxformer.tasks.translator import load_translator

    return out, load_translator(out, device="cpu", beam=5)


def test_a_tiny_model_learns_20_pairs_to_bleu_100(overfit):
    _, translator = overfit
    hypotheses = [" ".join(w) for w in translator.translate_tokens([s.split() for s, _ in PAIRS])]
    assert tokenized_bleu(hypotheses, [t for _, t in PAIRS])["bleu"] == 100.0


def test_beam_1_equals_greedy(overfit):
    _, translator = overfit
    model, tok = translator.model, translator.tokenizer
    pairs = encode_pairs(tok, [s.split() for s, _ in PAIRS[:4]], None)
    batch = make_batch(pairs, range(4), with_targets=False)
    beam1 = Translator(model, tok, beam=1).translate_tokens([s.split() for s, _ in PAIRS[:4]])
    # greedy by hand: the argmax of the next piece, one at a time
    with torch.no_grad():
        enc = model.get_encoder()(batch.input_ids, batch.attention_mask)
        ys = torch.full((4, 1), BOS)
        for _ in range(12):
            logits = model(attention_mask=batch.attention_mask, decoder_input_ids=ys, encoder_outputs=enc).logits
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    greedy = []
    for row in ys.tolist():
        row = row[1 : row.index(EOS)] if EOS in row else row[1:]
        greedy.append(tok.backend_tokenizer.decode(row).split())
    assert beam1 == greedy


def test_the_saved_model_is_the_average_of_the_kept_snapshots(tmp_path):
    src, tgt = _files(tmp_path, PAIRS)
    args = TranslationArguments(
        out=str(tmp_path / "run"), preset="tiny", source=str(src), target=str(tgt), valid_source=str(src),
        valid_target=str(tgt), vocab_size=120, max_tokens=100, max_steps=9, average_last=2, threads=1, quiet=True,
    )  # fmt: skip
    trainer = TranslationTrainer(args)
    out = trainer.train()
    from safetensors.torch import load_file

    snapshots = trainer.snapshots()
    steps = [int(p.stem.split("-")[1]) for p in snapshots]
    assert steps[-1] == 9 and len(steps) == 2
    assert json.loads((out / "training.json").read_text())["averaged"]["steps"] == steps
    a, b = (load_file(str(p)) for p in snapshots)
    saved = TranslationModel.from_pretrained(out).state_dict()
    assert torch.allclose(saved["shared.weight"], (a["shared.weight"] + b["shared.weight"]) / 2)


def test_average_replaces_the_model_by_the_mean_of_the_last_snapshots(overfit, tmp_path):
    import shutil

    from safetensors.torch import load_file

    from syntaxformer.tasks.translation import snapshot_files
    from syntaxformer.workflows.translation import run_translation_average

    folder, _ = overfit
    run = shutil.copytree(folder, tmp_path / "run")
    (run / "report.json").write_text(
        json.dumps(
            dict(
                arguments=dict(
                    valid_source=str(folder.parent / "train.en"), valid_target=str(folder.parent / "train.de")
                )
            )
        )
    )
    last = snapshot_files(run)[-1]
    report = run_translation_average(str(run), 1, beam=1, device="cpu")
    assert report["averaged"]["steps"] == [int(last.stem.split("-")[1])] and "bleu_tokenized" in report["valid"]
    saved = TranslationModel.from_pretrained(run).state_dict()
    assert torch.equal(saved["shared.weight"], load_file(str(last))["shared.weight"])
    with pytest.raises(InputError, match="--last 99: the run kept"):
        run_translation_average(str(run), 99)


def test_translate_command_reads_stdin_and_keeps_blank_lines(overfit, capsys, monkeypatch):
    import io

    folder, _ = overfit
    monkeypatch.setattr("sys.stdin", io.StringIO("A man is walking.\n\nTwo dogs are running.\n"))
    assert main(["translate", "--model", str(folder), "--input", "-"]) == 0
    assert capsys.readouterr().out == "ein mann geht.\n\nzwei hunde rennen.\n"
    threads = torch.get_num_threads()
    try:  # --threads: the model's CPU threads; the translations the same
        monkeypatch.setattr("sys.stdin", io.StringIO("A man is walking.\n"))
        assert main(["translate", "--model", str(folder), "--input", "-", "--threads", "1"]) == 0
        assert capsys.readouterr().out == "ein mann geht.\n" and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    assert main(["translate", "--model", str(folder), "--input", "-", "--threads", "0"]) == 1
    assert "--threads must be at least 1" in capsys.readouterr().err


def test_translate_refuses_a_folder_without_a_translation_model(tmp_path, capsys):
    assert main(["translate", "--model", str(tmp_path), "--input", "-"]) == 1
    assert "not a folder with a translation model" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- BLEU


def test_bleu_equals_sacrebleus_on_fixed_files(tmp_path):
    refs = ["ein mann geht .", "zwei hunde rennen im schnee .", "die frau liest ein buch ."]
    hyps = ["ein mann geht .", "zwei hunde laufen im schnee .", "eine frau liest ."]
    expected = BLEU(tokenize="none", force=True).corpus_score(hyps, [refs]).score
    assert tokenized_bleu(hyps, refs)["bleu"] == round(expected, 2)
    raw_refs = ["Ein Mann geht.", "Zwei Hunde rennen im Schnee.", "Die Frau liest ein Buch."]
    detok = [MosesText("de").detokenize(h.split()) for h in hyps]
    expected = BLEU(lowercase=True).corpus_score(detok, [raw_refs]).score
    assert detokenized_bleu(detok, raw_refs, lowercase=True)["bleu"] == round(expected, 2)
    assert "case:lc" in detokenized_bleu(detok, raw_refs, lowercase=True)["signature"]
    with pytest.raises(InputError, match="2 translations against 3 references"):
        tokenized_bleu(hyps[:2], refs)


def test_paired_bootstrap_finds_a_system_that_equals_the_references_better():
    refs = ["ein mann geht .", "zwei hunde rennen .", "die frau liest ein buch ."] * 10
    baseline = ["ein mann .", "zwei hunde .", "die frau liest ."] * 10
    result = paired_bootstrap(baseline, {"perfect": refs}, refs)
    assert result["perfect"]["bleu"] == 100.0 and result["perfect"]["p_value"] < 0.01


def test_names_an_ensemble_tells_one_parser_from_several():
    from syntaxformer.parser import names_an_ensemble

    assert names_an_ensemble("ensemble-ptb-lm") and names_an_ensemble(["a", "b"]) and names_an_ensemble("a,b")
    assert not names_an_ensemble("structformer-ptb-lm") and not names_an_ensemble(None)


def test_a_model_whose_source_parser_changed_since_training_is_warned_of(caplog):
    from syntaxformer.parser import parser_fingerprint

    tok = _tokenizer()
    model = TranslationModel(translation_config("structural-position", "tiny", len(tok)))
    model.config.source_parser = "structformer-ptb-lm"
    model.config.source_parser_fingerprint = parser_fingerprint("structformer-ptb-lm")
    with caplog.at_level("WARNING", logger="syntaxformer.tasks.translator"):
        Translator(model, tok)
    assert not caplog.records
    model.config.source_parser_fingerprint = "0" * 16  # trained with another parser of that name
    with caplog.at_level("WARNING", logger="syntaxformer.tasks.translator"):
        Translator(model, tok, name="m")
    assert [r.getMessage() for r in caplog.records] == [
        "m: its source parser structformer-ptb-lm has changed since it was trained (another fingerprint): its "
        "trees may differ from the training's"
    ]
