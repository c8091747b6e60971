"""The authors' training procedures as ``--recipe paper``: each recipe's settings, and the pieces they use
(token-filled batches, cut and dropped sentences, which tokens masking may select, the plateau rule on the
validation loss, Adam with an L2 decay, StructFormer's learned positions, the best model left in OUT),
against hand-worked values."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from syntaxformer.data.batching import LengthBucketSampler, filled_batches
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.models import MODELS, make_config
from syntaxformer.tasks.language_model import Trainer
from syntaxformer.tasks.language_model_data import _encode_counted
from syntaxformer.tasks.run import train
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.plateau import PlateauSchedule
from syntaxformer.workflows.induce import RECIPES, recipe_decoder, resolve_recipe

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------ the recipes


def test_the_tree_transformer_paper_recipe_is_the_authors_procedure():
    fields, overrides, min_layer = resolve_recipe("tree-transformer", "paper")
    expected = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9, warmup_steps=0, schedule="constant", clip=1.5)
    assert {k: fields[k] for k in expected} == expected
    assert (fields["batch_size"], fields["max_steps"], fields["shuffle"]) == (64, 60000, False)
    assert (fields["mask_rate"], fields["mask_replace"], fields["mask_cls"], fields["add_cls"]) == (
        1 / 7,
        "bert",
        True,
        True,
    )
    assert (fields["max_length"], fields["overflow"], fields["max_sentence_length"]) == (60, "cut", 70)
    assert (fields["preset"], fields["valid_fraction"], overrides) == (
        "paper",
        0.0,
        {"constituent_variant": "official"},
    )
    assert min_layer == 2 and recipe_decoder("tree-transformer", "paper") == {
        "descend_threshold": 0.7,
        "threshold": 0.8,
    }
    assert "decoder" not in fields  # a decoder setting, not a training field


def test_the_structformer_paper_recipe_is_the_authors_procedure():
    fields, overrides, _ = resolve_recipe("structformer", "paper")
    assert (fields["optimizer"], fields["lr"], fields["betas"], fields["eps"]) == ("adam-l2", 3e-4, (0.9, 0.999), 1e-9)
    assert (fields["weight_decay"], fields["clip"], fields["schedule"], fields["plateau_patience"]) == (
        1.2e-6,
        0.25,
        "plateau",
        2,
    )
    assert (fields["batch_size"], fields["min_batch_tokens"], fields["epochs"]) == (None, 4096, 100)
    assert (fields["mask_rate"], fields["mask_replace"], fields["mask_unknown"]) == (0.3, "mask", False)
    assert (fields["keep_best"], fields["final_model"], fields["eval_each_epoch"]) == (True, "best", True)
    assert overrides == {"position_embeddings": 500} and recipe_decoder("structformer", "paper") == {
        "dependency": "argmax"
    }


def test_the_on_lstm_paper_recipe_is_the_awd_lstm_procedure():
    fields, _, _ = resolve_recipe("on-lstm", "paper")
    assert (fields["bptt"], fields["batch_size"], fields["optimizer"], fields["lr"]) == (70, 20, "sgd", 30.0)
    assert (fields["nonmono"], fields["asgd_restart_epoch"], fields["ar_alpha"], fields["tar_beta"]) == (
        5,
        500,
        2.0,
        1.0,
    )
    assert (fields["weight_decay"], fields["clip"], fields["epochs"], fields["final_model"]) == (
        1.2e-6,
        0.25,
        1000,
        "best",
    )
    for model in ("tree-transformer", "structformer", "on-lstm"):
        TrainArguments(
            out="x", model=model, **{k: v for k, v in resolve_recipe(model, "paper")[0].items() if k != "corpus"}
        ).check()


def test_a_recipe_a_model_lacks_is_refused_in_one_line():
    with pytest.raises(Exception, match="--recipe nope: on-lstm has the recipes default, long, paper"):
        resolve_recipe("on-lstm", "nope")
    assert set(RECIPES["on-lstm"]) == {"default", "long", "paper"}


# ------------------------------------------------------------------------------------------ batches


def test_filled_batches_take_items_until_the_budget_is_reached():
    assert filled_batches([3, 1, 4, 1, 5], 5) == [[0, 1, 2], [3, 4]]
    assert filled_batches([6, 2, 2], 5) == [[0], [1, 2]]  # one item may fill a batch alone; the last falls short
    assert filled_batches([], 5) == []


def test_token_filled_batches_are_the_sorted_corpus_in_a_shuffled_order():
    lengths = [5, 2, 9, 2, 7, 3, 1, 4]
    sampler = LengthBucketSampler(lengths, min_tokens=6, seed=3)
    sorted_batches = [[6, 1, 3, 5], [7, 0], [4], [2]]  # by length (stable): 1, 2, 2, 3 | 4, 5 | 7 | 9
    for epoch in (0, 1):
        assert sorted(sampler.batches(epoch)) == sorted(sorted_batches)
    assert sampler.batches(0) != sampler.batches(1) or sampler.batches(1) != sampler.batches(2)
    assert LengthBucketSampler(lengths, min_tokens=6, shuffle=False).batches(0) == sorted_batches
    with pytest.raises(ValueError, match="exactly one of batch_size, max_tokens and min_tokens"):
        LengthBucketSampler(lengths, batch_size=2, min_tokens=6)


def test_sentences_are_cut_at_max_length_and_dropped_over_max_sentence_length():
    sentences = [["a"] * n for n in (3, 5, 7, 9)]
    tokenizer = build_word_tokenizer(sentences, add_cls=True)  # [CLS] + words: 4, 6, 8, 10 tokens
    args = TrainArguments(out="x", max_length=6, overflow="cut", max_sentence_length=8)
    ids, over = _encode_counted(tokenizer, sentences, args)
    assert [len(x) for x in ids] == [4, 6, 6] and over == 1  # 10 dropped, 8 cut to 6
    assert ids[2] == ids[1]


def test_which_tokens_masking_may_select():
    tokenizer = build_word_tokenizer([["a", "b"]])
    pad, unk, mask, cls = (tokenizer.convert_tokens_to_ids(t) for t in ("[PAD]", "[UNK]", "[MASK]", "[CLS]"))
    data = SimpleNamespace(special_ids=sorted({pad, cls, mask}))

    def unmasked(**fields):
        return Trainer._unmasked_ids(
            SimpleNamespace(args=TrainArguments(out="x", **fields), tokenizer=tokenizer, data=data)
        )

    assert unmasked() == sorted({pad, cls, mask})
    assert unmasked(mask_cls=True) == sorted({pad, mask})
    assert unmasked(mask_unknown=False) == sorted({pad, cls, mask, unk})


# ------------------------------------------------------------------------------------------ optimisation


def test_plateau_halves_the_rate_after_patience_evaluations_without_a_lower_loss():
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.4)
    schedule = PlateauSchedule(optimizer, factor=0.5, patience=2, mode="min")
    rates = []
    for step, loss in enumerate([3.0, 2.0, 2.5, 2.0, 2.5, 1.0, 1.5], start=1):
        schedule.observe(step, loss)
        rates.append(optimizer.param_groups[0]["lr"])
    # 2.0 at step 2 is the best; steps 3, 4, 5 do not go below it (2.0 is no improvement): halved at step 5
    assert rates == [0.4, 0.4, 0.4, 0.4, 0.2, 0.2, 0.2]


def test_adam_l2_adds_the_decay_to_the_gradient_and_adam_decouples_it(tmp_path):
    def optimizer(name):
        loop = Trainer(TrainArguments(out=str(tmp_path), max_steps=1, weight_decay=0.1, optimizer=name))
        loop.device = torch.device("cpu")
        return loop.make_optimizer([torch.nn.Parameter(torch.ones(2))])

    l2, decoupled = optimizer("adam-l2"), optimizer("adam")
    assert type(l2) is torch.optim.Adam and type(decoupled) is torch.optim.AdamW
    assert l2.param_groups[0]["weight_decay"] == decoupled.param_groups[0]["weight_decay"] == 0.1


# ------------------------------------------------------------------------------------------ models and runs


def test_structformer_positions_reach_the_transformer_layers_only():
    torch.manual_seed(0)
    plain = MODELS["structformer"](make_config("structformer", "tiny", vocab_size=20)).eval()
    torch.manual_seed(0)
    positioned = MODELS["structformer"](
        make_config("structformer", "tiny", vocab_size=20, position_embeddings=9)
    ).eval()
    state = positioned.state_dict()
    state.update(plain.state_dict())
    positioned.load_state_dict(state)
    ids = torch.randint(4, 20, (2, 7))
    a, b = plain.structformer(ids), positioned.structformer(ids)
    assert torch.equal(a.distances, b.distances) and torch.equal(a.heights, b.heights)  # the parser sees none
    assert not torch.allclose(a.last_hidden_state, b.last_hidden_state)
    with torch.no_grad():
        positioned.structformer.position_embeddings.weight.zero_()
    assert torch.equal(plain.structformer(ids).last_hidden_state, positioned.structformer(ids).last_hidden_state)
    with pytest.raises(ValueError, match="10 tokens, more than 9 positions"):
        positioned.structformer(torch.randint(4, 20, (1, 10)))


def test_the_best_model_is_left_in_out_after_epoch_validations(tmp_path, ptb_words_file):
    out = Path(
        train(
            out=str(tmp_path / "run"),
            model="tree-transformer",
            preset="tiny",
            corpus=str(ptb_words_file),
            epochs=3,
            batch_size=32,
            lr=3e-3,
            eval_every=0,
            eval_each_epoch=True,
            keep_best=True,
            final_model="best",
            schedule="plateau",
            seed=1,
            threads=1,
            quiet=True,
        )
    )
    record = json.loads((out / "training.json").read_text())
    steps = [step for step, _ in record["valid_history"]]
    per_epoch = steps[1]
    assert steps == [0, per_epoch, 2 * per_epoch, 3 * per_epoch]  # step 0, then each epoch's end
    best_step, best_loss = min(record["valid_history"][1:], key=lambda x: x[1])
    assert json.loads((out / "best" / "best.json").read_text()) == {"step": best_step, "valid_loss": best_loss}
    saved, best = load_file(out / "model.safetensors"), load_file(out / "best" / "model.safetensors")
    assert saved.keys() == best.keys() and all(torch.equal(saved[k], best[k]) for k in saved)


@pytest.fixture(scope="module")
def ptb_words_file(tmp_path_factory) -> Path:
    """The first 200 ptb-sample sentences as a text file."""
    from syntaxformer.data.corpus import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "ptb-200.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample")[:200]) + "\n")
    return path


def test_final_model_best_loads_the_kept_model_unless_it_is_step_zeros(tmp_path):
    config = make_config("tree-transformer", "tiny", vocab_size=12)
    torch.manual_seed(0)
    last = MODELS["tree-transformer"](config)
    torch.manual_seed(1)
    kept = MODELS["tree-transformer"](config)
    kept.save_pretrained(tmp_path / "best")

    def final(step: int, choice: str):
        (tmp_path / "best" / "best.json").write_text(json.dumps({"step": step, "valid_loss": 1.0}))
        args = TrainArguments(out=str(tmp_path), max_steps=1, keep_best=True, final_model=choice)
        return Trainer.final_model(SimpleNamespace(args=args, out=tmp_path, model=last))

    chosen = final(40, "best")
    assert chosen is not last and all(torch.equal(a, b) for a, b in zip(chosen.parameters(), kept.parameters()))
    assert final(0, "best") is last and final(40, "last") is last
