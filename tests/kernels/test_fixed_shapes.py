"""Fixed batch shapes (``fixed_shapes``): columns padded to a multiple, a short batch filled with empty
rows up to ``batch_size``, and the masked positions as a list of fixed size per shape, padded with a
dummy position labelled -100. The masks are those of the unpadded batch, and the loss and gradients
are the unpadded batch's for every language model of the registry (float64, dropout off: to 1e-10;
the fixed-size gather alone, in float32: to 1e-6)."""

from __future__ import annotations

import pytest
import torch

from syntaxformer.blocks.mlm_head import labelled_positions, padded_positions
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, make_config
from syntaxformer.tasks.language_model import Trainer
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.objectives import build_objective, mask_capacity

torch.set_num_threads(1)

SENTENCES = [["the", "old", "man", "sat"], ["on", "the", "bench"], ["a", "man", "sat", "on", "a", "bench", "."]]
MODEL_CASES = [
    ("tree-transformer", {}),
    ("tree-transformer", {"constituent_variant": "official"}),
    ("structformer", {}),
    ("on-lstm", {}),
    ("on-lstm-san", {}),
]


def test_padded_positions_append_a_dummy_labelled_minus_100():
    labels = torch.tensor([[5, -100, 7], [-100, 9, -100]])
    assert labelled_positions(labels).tolist() == [0, 2, 4]
    assert padded_positions(labels, 6).tolist() == [0, 2, 4, 1, 1, 1]
    assert padded_positions(labels, 2).tolist() == [0, 2, 4]  # no room: the list as it is
    with pytest.raises(ValueError, match="cannot pad"):
        padded_positions(labels, 7)


def test_mask_capacity_is_a_multiple_of_8_within_the_batch():
    assert mask_capacity(64, 32, 0.15) == 464  # 1.25 * (0.15 * 2048 + 64) = 464
    assert mask_capacity(2, 3, 0.15) == 6  # at most B·N
    assert all(mask_capacity(b, n, 0.15) % 8 == 0 for b, n in ((8, 8), (16, 24), (64, 40)))


def _model(model: str, overrides: dict, vocab_size: int, dtype=torch.float64):
    torch.manual_seed(0)
    net = MODELS[model](make_config(model, "tiny", vocab_size=vocab_size, **overrides)).eval()  # no dropout
    return net.to(dtype)


def _loss_and_grads(net, batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    net.zero_grad()
    kw = batch.model_inputs()
    if batch.masked_positions is not None:
        kw.update(masked_only=True, masked_positions=batch.masked_positions)
    loss = net(**kw).loss
    loss.backward()
    return loss.detach(), [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in net.parameters()]


def _assert_same(a, b, atol):
    (loss_a, grads_a), (loss_b, grads_b) = a, b
    torch.testing.assert_close(loss_b, loss_a, rtol=0, atol=atol)
    assert any(g.abs().sum() > 0 for g in grads_a)
    for x, y in zip(grads_a, grads_b):
        torch.testing.assert_close(y, x, rtol=0, atol=atol)


def _batches(model: str, **fixed):
    """The batch of :data:`SENTENCES` as today (padded to the longest) and with ``fixed`` options."""
    tokenizer = build_word_tokenizer(SENTENCES)
    sequences = [tokenizer(s, is_split_into_words=True)["input_ids"] for s in SENTENCES]
    out = []
    for options in ({}, fixed):
        args = TrainArguments(out="x", model=model, max_steps=1, mask_rate=0.4, batch_size=5, **options)
        objective = build_objective(MODELS[model], args, tokenizer, [0, 2, 3])
        out.append(objective.batch(sequences, torch.Generator().manual_seed(7)))
    return tokenizer, out


def test_fixed_shapes_keep_the_masks_and_pad_rows_columns_and_positions():
    _, (plain, fixed) = _batches("tree-transformer", fixed_shapes=True)
    b, n = plain.input_ids.shape
    assert (b, n) == (3, 7) and fixed.input_ids.shape == (5, 8)
    assert torch.equal(fixed.input_ids[:b, :n], plain.input_ids) and torch.equal(fixed.labels[:b, :n], plain.labels)
    assert (fixed.attention_mask[b:] == 0).all() and (fixed.labels[b:] == -100).all()
    assert fixed.n_tokens == plain.n_tokens
    assert fixed.masked_positions.shape == (mask_capacity(5, 8, 0.4),)
    targets = fixed.labels.flatten()[fixed.masked_positions]
    m = plain.masked_positions.shape[0]
    assert torch.equal(targets[:m], plain.labels.flatten()[plain.masked_positions]) and (targets[m:] == -100).all()


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-10), (torch.float32, 1e-6)])
@pytest.mark.parametrize("model, overrides", MODEL_CASES[:3] + MODEL_CASES[4:])
def test_the_fixed_size_gather_gives_the_loss_and_gradients_of_the_variable_one(model, overrides, dtype, atol):
    tokenizer, (plain, _) = _batches(model)
    net = _model(model, overrides, len(tokenizer), dtype)
    size = plain.masked_positions.shape[0] + 13
    fixed = type(plain)(plain.input_ids, plain.attention_mask, plain.labels)
    fixed.masked_positions = padded_positions(plain.labels, size)
    _assert_same(_loss_and_grads(net, plain), _loss_and_grads(net, fixed), atol)


@pytest.mark.parametrize("model, overrides", MODEL_CASES)
def test_fixed_shape_batches_give_the_loss_and_gradients_of_unpadded_ones(model, overrides):
    tokenizer, (plain, fixed) = _batches(model, fixed_shapes=True, pad_to_multiple=16)
    assert fixed.input_ids.shape[0] == 5 and fixed.input_ids.shape[1] % 16 == 0
    net = _model(model, overrides, len(tokenizer))
    _assert_same(_loss_and_grads(net, plain), _loss_and_grads(net, fixed), 1e-10)


def test_a_trainer_with_fixed_shapes_makes_few_shapes(tmp_path):
    args = TrainArguments(
        out=str(tmp_path), preset="tiny", max_steps=1, batch_size=48, fixed_shapes=True, threads=1, quiet=True
    )
    trainer = Trainer(args)
    trainer.build()
    batches = trainer.sampler.batches(0)
    shapes = set()
    for indices in batches[:6] + batches[-1:]:
        batch = trainer.make_batch(indices)
        b, n = batch.input_ids.shape
        assert b == 48 and n % 8 == 0 and batch.masked_positions.shape == (mask_capacity(b, n, args.mask_rate),)
        shapes.add((b, n))
    assert len(shapes) < 7


def test_fixed_shapes_need_a_batch_size():
    tokenizer = build_word_tokenizer(SENTENCES)
    args = TrainArguments(out="x", max_steps=1, batch_size=None, max_tokens=100, fixed_shapes=True)
    with pytest.raises(InputError, match="--batch-size"):
        build_objective(MODELS["tree-transformer"], args, tokenizer, [0])


def test_token_budget_batches_get_one_shape_per_padded_length(tmp_path):
    """--min-batch-tokens (StructFormer's paper batches: the length-sorted corpus cut into batches of at
    least that many real tokens, the same every epoch) with --fixed-shapes: every batch of a padded
    length has the most rows of any batch of that length, so there is one shape per length; the rows
    added are empty (no tokens, no targets)."""
    common = dict(out=str(tmp_path), preset="tiny", corpus="ptb-sample:dev", max_steps=1, threads=1, quiet=True)
    trainer = Trainer(TrainArguments(batch_size=None, min_batch_tokens=256, fixed_shapes=True, **common))
    trainer.build()
    plain = Trainer(TrainArguments(batch_size=None, min_batch_tokens=256, **dict(common, out=str(tmp_path / "p"))))
    plain.build()
    table = trainer.objective.rows_by_length
    shapes = {}
    batches = trainer.sampler.batches(0)
    assert batches == plain.sampler.batches(0)
    for indices in batches:
        batch, unpadded = trainer.make_batch(indices), plain.make_batch(indices)
        b, n = batch.input_ids.shape
        assert n % 8 == 0 and b == table[n] >= unpadded.input_ids.shape[0]
        assert batch.n_tokens == unpadded.n_tokens and (batch.labels != -100).sum() == (unpadded.labels != -100).sum()
        shapes.setdefault(n, set()).add(b)
    assert all(len(rows) == 1 for rows in shapes.values()) and set(shapes) == set(table)
    assert len(table) < len(batches) / 4  # few graphs for many batches


def test_fixed_shapes_with_a_padded_token_budget_are_refused():
    tokenizer = build_word_tokenizer(SENTENCES)
    args = TrainArguments(out="x", max_steps=1, batch_size=None, max_tokens=100, fixed_shapes=True)
    with pytest.raises(InputError, match="--min-batch-tokens"):
        build_objective(MODELS["tree-transformer"], args, tokenizer, [0])
