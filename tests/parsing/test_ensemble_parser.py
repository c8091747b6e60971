"""The ensemble as a parser (syntaxformer/parser.py: EnsembleParser, load_parser of several models), its
command line and spaCy use, bad members, the corpus filter of the held-out setting, and distillation
into one student (syntaxformer/tasks/distill.py)."""

from __future__ import annotations

import json

import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.data.corpus import exclude_treebank, load_corpus
from syntaxformer.decoding.ensemble import ensemble_spans, head_vote
from syntaxformer.decoding.spans import to_bracketed, tree_distances
from syntaxformer.errors import InputError
from syntaxformer.parser import EnsembleParser, Parser, load_parser, save_ensemble
from syntaxformer.tasks.distill import DistillJob, distill, rank_loss, student_masking

MEMBERS = ["structformer-ptb-lm", "tree-transformer-ptb-lm", "on-lstm-ptb-lm"]
SENTENCES = ["The old man sat on the bench.", "Dogs bark loudly at night in the old town ."]


@pytest.fixture(scope="module")
def members():
    return [load_parser(name) for name in MEMBERS]


def test_the_ensemble_tree_is_the_vote_of_its_members_trees(members):
    ensemble = load_parser(MEMBERS)
    assert isinstance(ensemble, EnsembleParser) and ensemble.weights == [1.0, 1.0, 1.0]
    words = [["the", "old", "man", "sat", "on", "the", "bench"], ["dogs", "bark", "loudly", "at", "night"]]
    spans, heads, structures = ensemble.word_parses(words)
    member_parses = [m.word_parses(words) for m in members]
    for i, sentence in enumerate(words):
        assert spans[i] == ensemble_spans([p[0][i] for p in member_parses], len(sentence))
        # only the StructFormer gives heads: the head vote of one member is its heads
        assert heads[i] == member_parses[0][1][i] == head_vote([member_parses[0][1][i]])
        assert len(structures[i]) == 3
    # trees over the tokens, punctuation put back, and dependencies kept
    trees = ensemble.parse_sents(SENTENCES)
    assert [t.leaves()[-1] for t in trees] == [".", "."] and len(trees[0].leaves()) == 8
    assert [row["head"] for row in ensemble.parse_dependencies(SENTENCES[:1])[0]][-1] != 0  # "." on the root word
    assert ensemble.gives_dependencies


def test_one_member_is_that_parser(members):
    alone = load_parser(MEMBERS[1:2])
    assert isinstance(alone, EnsembleParser)
    assert [str(t) for t in alone.parse_sents(SENTENCES)] == [str(t) for t in members[1].parse_sents(SENTENCES)]
    assert not alone.gives_dependencies


def test_the_shipped_ensemble_and_an_ensemble_folder(tmp_path, members):
    shipped = load_parser("ensemble-ptb-lm")
    chosen = ["structformer-ptb-lm", "on-lstm-ptb-lm", "compound-pcfg-ptb-lm", "right-branching"]
    assert [m.name.rsplit("/", 1)[-1] for m in shipped.members] == chosen
    assert shipped.weights == [1.0, 1.0, 1.0, 1.0]
    assert shipped.max_words is None  # the PCFG member's 300 words: it abstains on longer sentences
    listed = load_parser(",".join(chosen))
    assert [str(t) for t in shipped.parse_sents(SENTENCES)] == [str(t) for t in listed.parse_sents(SENTENCES)]
    save_ensemble(tmp_path / "mine", ["structformer-ptb-lm", "on-lstm-ptb-lm"], [2.0, 1.0])
    mine = load_parser(tmp_path / "mine")
    assert mine.weights == [2.0, 1.0]
    # a member of more than half the weight decides: the StructFormer's trees
    assert [str(t) for t in mine.parse_sents(SENTENCES)] == [str(t) for t in members[0].parse_sents(SENTENCES)]


def test_a_parser_fingerprint_follows_what_the_name_stands_for(tmp_path):
    from syntaxformer.parser import parser_fingerprint

    save_ensemble(tmp_path / "a", ["structformer-ptb-lm", "right-branching"], [2.0, 1.0])
    save_ensemble(tmp_path / "b", ["structformer-ptb-lm", "right-branching"], [2.0, 1.0])
    save_ensemble(tmp_path / "c", ["structformer-ptb-lm", "right-branching"], [2.0, 1.5])
    a, b, c = (parser_fingerprint(tmp_path / n) for n in "abc")
    assert a == b != c and len(a) == 16
    assert parser_fingerprint("right-branching") != parser_fingerprint("left-branching")
    shipped = parser_fingerprint("structformer-ptb-lm")
    assert shipped == parser_fingerprint("structformer-ptb-lm") != parser_fingerprint("on-lstm-ptb-lm")
    # the same weights with other decoder settings are another parser
    import shutil

    from syntaxformer.pretrained import pretrained_folder

    copy = tmp_path / "copy"
    shutil.copytree(pretrained_folder("structformer-ptb-lm"), copy)
    assert parser_fingerprint(copy) == shipped
    original = (copy / "decoder.json").read_bytes()
    settings = json.loads(original)
    (copy / "decoder.json").write_text(json.dumps({**settings, "threshold": 0.5}))
    assert parser_fingerprint(copy) != shipped
    (copy / "decoder.json").write_bytes(original)  # rewritten: read again, not the remembered hash
    assert parser_fingerprint(tmp_path / "copy" / ".." / "copy") == shipped


def test_a_model_folders_fingerprint_is_the_hash_of_its_files():
    import hashlib

    from syntaxformer.parser import FINGERPRINTED_FILES, parser_fingerprint
    from syntaxformer.pretrained import pretrained_folder

    folder = pretrained_folder("structformer-ptb-lm")
    digest = hashlib.sha1()
    for name in FINGERPRINTED_FILES:
        if (folder / name).is_file():
            digest.update(name.encode("utf-8") + (folder / name).read_bytes())
    assert parser_fingerprint("structformer-ptb-lm") == digest.hexdigest()[:16]


def test_parse_command_with_members(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert main(["parse", "--input", str(text), "--tokenize", "treebank", "--model", ",".join(MEMBERS)]) == 0
    printed = capsys.readouterr().out.splitlines()
    expected = load_parser(MEMBERS).parse_sents(SENTENCES)
    assert printed == [" ".join(str(t).split()) for t in expected]
    assert main(["parse", "--input", str(text), "--model", "ensemble-ptb-lm", "--out", str(tmp_path / "o")]) == 0
    assert len((tmp_path / "o" / "trees.txt").read_text().splitlines()) == 2
    assert (tmp_path / "o" / "dependencies.conllu").is_file()
    capsys.readouterr()
    assert (
        main(["parse", "--input", str(text), "--model", "ensemble-ptb-lm", "--out", str(tmp_path / "j"), "--json"]) == 1
    )
    assert "an ensemble has several" in capsys.readouterr().err


@pytest.mark.parametrize(
    "model, message",
    [
        ("structformer-ptb-lm,no-such-parser", "ensemble member no-such-parser: not a model folder"),
        (",", "an ensemble needs at least one member"),
    ],
)
def test_bad_members_are_one_line_errors(model, message, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a b c\n", encoding="utf-8")
    assert main(["parse", "--input", str(text), "--model", model]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_member_folder_without_a_model_and_damaged_ensemble_files(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"ensemble member .*empty: not a model folder"):
        load_parser(["structformer-ptb-lm", tmp_path / "empty"])
    for content, message in [
        ("{not json", "unreadable ensemble file"),
        ('{"members": []}', '"members" must be a non-empty list'),
        ('{"members": ["structformer-ptb-lm"], "weights": [1, 2]}', '"weights" must be one number per member'),
    ]:
        folder = tmp_path / "bad"
        folder.mkdir(exist_ok=True)
        (folder / "ensemble.json").write_text(content, encoding="utf-8")
        with pytest.raises(InputError, match=message) as error:
            load_parser(folder)
        assert "ensemble.json" in str(error.value)
    with pytest.raises(InputError, match="decoder settings apply to one model"):
        load_parser(MEMBERS, {"threshold": 0.5})
    with pytest.raises(InputError, match="one finite weight >= 0 each"):
        load_parser(MEMBERS[:2], weights=[1.0, -1.0])
    with pytest.raises(InputError, match="member weights are for an ensemble"):
        load_parser(MEMBERS[0], weights=[1.0])


class _OtherWords(Parser):
    """A member that parses other words than it is given (one word too many)."""

    def word_parses(self, words):
        spans, heads, structures = super().word_parses([list(w) + ["extra"] for w in words])
        return spans, heads, structures


def test_a_member_whose_words_differ_is_named(members):
    other = _OtherWords(members[2].model, members[2].tokenizer, members[2].options, name="other-words")
    with pytest.raises(InputError, match="ensemble member other-words: its tree does not cover the sentence's words"):
        EnsembleParser([members[0], other]).parse_sents(SENTENCES)


def test_spacy_component_takes_an_ensemble():
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("syntaxformer", config={"model": "ensemble-ptb-lm"})
    doc = nlp(" ".join(SENTENCES))
    expected = load_parser("ensemble-ptb-lm").parse_sents([[t.text for t in s] for s in doc.sents])
    assert [s._.parse_string for s in doc.sents] == [to_bracketed(t) for t in expected]
    assert [t.head.i for t in doc] != [t.i for t in doc]  # the StructFormer member's heads are set


def test_exclude_treebank_removes_exactly_its_sentences():
    sample = load_corpus("ptb-sample")
    kept, removed = exclude_treebank(sample, "ptb-sample")
    assert (kept, removed) == ([], 3914)
    kept, removed = exclude_treebank(sample, "ptb-sample:dev")
    dev = load_corpus("ptb-sample:dev")
    in_dev = [s for s in sample if tuple(s) in {tuple(d) for d in dev}]
    assert (len(dev), removed, len(in_dev)) == (1921, 1924, 1924)  # 3 test-half sentences repeat dev ones
    assert kept == [s for s in sample if s not in in_dev]
    # Mikolov's ptb-lm conventions: <unk> stands for any word, $ is kept, % is written N
    words = dev[0]
    unk = ["<unk>"] + words[1:]
    assert exclude_treebank([unk, ["a", "b"]], "ptb-sample:dev") == ([["a", "b"]], 1)


def test_rank_loss_values():
    targets = torch.tensor([[3.0, 1.0, 2.0]])
    mask = torch.tensor([[True, True, True]])
    # distances in the targets' order by margins of at least 1: no loss
    assert rank_loss(torch.tensor([[5.0, 1.0, 3.0]]), targets, mask).item() == 0.0
    # all equal: every one of the 6 ordered pairs with different targets costs 1
    assert rank_loss(torch.zeros(1, 3), targets, mask).item() == 1.0
    # a masked gap is not compared; equal targets are not compared
    masked = rank_loss(torch.tensor([[0.0, 0.0, 9.0]]), targets, torch.tensor([[True, True, False]]))
    assert masked.item() == 1.0
    assert rank_loss(torch.zeros(1, 2), torch.tensor([[1.0, 1.0]]), torch.tensor([[True, True]])).item() == 0.0


def test_distill_learns_the_teachers_trees(tiny_model, tmp_path, monkeypatch):
    student = tiny_model("structformer")
    out = tmp_path / "student"
    job = DistillJob(
        out=str(out), teacher="on-lstm-ptb-lm", student=str(student), corpus="ptb-sample:test", epochs=3,
        max_sentences=40, lr=1e-2, dev_treebank="ptb-sample:test", threads=1,
    )  # fmt: skip
    report = distill(job)
    rows = [json.loads(line) for line in (out / "teacher.jsonl").read_text().splitlines()]
    teacher = load_parser("on-lstm-ptb-lm")
    words = [r["words"] for r in rows]
    assert len(rows) == 40
    assert [r["distances"] for r in rows] == [
        tree_distances(s, len(w)) for s, w in zip(teacher.word_parses(words)[0], words)
    ]
    losses = [h["train_rank_loss"] for h in report["history"][1:]]
    assert losses[-1] < losses[0]
    assert report["kept_epoch"] == max(report["history"], key=lambda h: (h["dev_sentence_f1"], -h["epoch"]))["epoch"]
    load_parser(out / "model").parse("The old man sat on the bench.")  # the kept student parses
    # a second run reads the teacher's trees back instead of parsing again, and trains the same
    monkeypatch.setattr("syntaxformer.tasks.distill.load_parser", None)
    again = distill(job)["history"]
    assert [{k: v for k, v in h.items() if k != "minutes"} for h in again] == [
        {k: v for k, v in h.items() if k != "minutes"} for h in report["history"]
    ]


def test_the_second_stage_learns_the_students_masked_lm_beside_the_trees(tiny_model, tmp_path, monkeypatch):
    student = tiny_model("structformer")
    common = dict(
        student=str(student), teacher="on-lstm-ptb-lm", corpus="ptb-sample:test", epochs=2, max_sentences=24,
        lr=1e-2, dev_treebank="ptb-sample:test", threads=1, train="all",
    )  # fmt: skip

    def ffn(folder):  # a Transformer layer's weight: the parse network does not use it
        return load_parser(folder).model.structformer.encoder.layers[0].ffn_in.weight.detach()

    start = ffn(student).clone()
    # the first stage, all weights free: the Transformer layers have no gradient and stay as they were
    first = distill(DistillJob(out=str(tmp_path / "first"), **common))
    assert first["loss"] == "rank (the trees alone)" and first["masked_lm"] is None
    assert all(set(h) == {"epoch", "train_rank_loss", "dev_sentence_f1", "minutes"} for h in first["history"][1:])
    assert torch.equal(ffn(tmp_path / "first" / "model"), start)  # whichever epoch is kept
    # the second stage: both losses every epoch, and the masked LM moves the Transformer layers
    second = distill(DistillJob(out=str(tmp_path / "second"), mlm_weight=1.0, **{**common, "epochs": 1}))
    (epoch,) = second["history"][1:]
    assert set(epoch) == {"epoch", "train_rank_loss", "train_mlm_loss", "dev_sentence_f1", "minutes"}
    assert epoch["train_mlm_loss"] > 0 and second["loss"] == "1.0 * rank + 1.0 * masked LM (nats)"
    assert second["kept_epoch"] == 1 and not torch.equal(ffn(tmp_path / "second" / "model"), start)
    # the untrained tiny student has no training.json: train's own defaults
    assert second["masked_lm"] == dict(mask_rate=0.15, mask_replace="bert", mask_unknown=True, mask_cls=False)
    # the masked LM alone needs no teacher
    monkeypatch.setattr("syntaxformer.tasks.distill.load_parser", None)
    alone = distill(DistillJob(out=str(tmp_path / "alone"), tree_weight=0.0, mlm_weight=1.0, **{**common, "epochs": 1}))
    assert set(alone["history"][1]) == {"epoch", "train_mlm_loss", "dev_sentence_f1", "minutes"}
    assert not (tmp_path / "alone" / "teacher.jsonl").exists()


def test_student_masking_is_the_students_own_rule(tiny_model, tmp_path):
    folder = tmp_path / "student"
    folder.mkdir()
    tokenizer = load_parser(tiny_model("structformer")).tokenizer
    record = {"arguments": {"mask_rate": 0.3, "mask_replace": "mask", "mask_unknown": False}}
    (folder / "training.json").write_text(json.dumps(record))
    objective, settings = student_masking(folder, tokenizer)
    assert settings == dict(mask_rate=0.3, mask_replace="mask", mask_unknown=False, mask_cls=False)
    t = tokenizer
    assert objective.special_ids == sorted(
        i for i in {t.pad_token_id, t.mask_token_id, t.cls_token_id, t.unk_token_id} if i is not None
    )
    # "mask": every selected word becomes [MASK]; the labels keep the original words there
    ids = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14]] * 4
    batch = objective.batch(ids, torch.Generator().manual_seed(0))
    selected = batch.labels != -100
    assert selected.any(dim=1).all()
    assert (batch.input_ids[selected] == t.mask_token_id).all()
    assert (batch.labels[selected] == torch.tensor(ids)[selected]).all()
    assert (batch.input_ids[~selected] == torch.tensor(ids)[~selected]).all()
    (folder / "training.json").write_text("{not json")
    with pytest.raises(InputError, match="unreadable training record"):
        student_masking(folder, tokenizer)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(tree_weight=0.0, mlm_weight=0.0), "nothing to learn"),
        (dict(mlm_weight=-1.0), "--mlm-weight must be a number >= 0"),
        (dict(clip=0.0), "--clip must be positive"),
    ],
)
def test_distill_refuses_bad_mixtures(options, message, tmp_path):
    with pytest.raises(InputError, match=message):
        distill(DistillJob(out=str(tmp_path / "x"), **options))


def test_distill_refuses_a_student_without_distances(tiny_model, tmp_path):
    with pytest.raises(InputError, match="syntactic-distance parser"):
        distill(
            DistillJob(
                out=str(tmp_path / "x"),
                teacher="on-lstm-ptb-lm",
                student=str(tiny_model()),
                corpus="ptb-sample:dev",
                max_sentences=4,
            )
        )
