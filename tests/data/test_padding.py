"""Batches padded to a few lengths (``pad_to_multiple``): the same masks, targets and order of masked
positions as batches padded to their longest sentence, and the same loss and gradients (dropout off)
for every language model of the registry: computed in float64, they agree to 1e-10 (in float32 the
sums over more, zero, padded terms are taken in another order: differences of float32 rounding, up to
~1e-4 of a bias's gradient)."""

from __future__ import annotations

import pytest
import torch

from syntaxformer.data.batching import pad_batch, pad_columns, padded_length
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.models import MODELS, make_config
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.objectives import build_objective

torch.set_num_threads(1)

SENTENCES = [["the", "old", "man", "sat"], ["on", "the", "bench"], ["a", "man", "sat", "on", "a", "bench", "."]]


def test_padded_length_rounds_up_to_the_multiple():
    assert [padded_length(n, 8) for n in (1, 7, 8, 9, 16)] == [8, 8, 8, 16, 16]
    assert padded_length(13, None) == padded_length(13, 1) == 13
    assert pad_columns(torch.tensor([[1, 2]]), 4, 0).tolist() == [[1, 2, 0, 0]]
    with pytest.raises(ValueError, match="cannot pad 2 columns to 1"):
        pad_columns(torch.tensor([[1, 2]]), 1, 0)
    ids, mask = pad_batch([[5, 6, 7], [8]], 0, multiple=4)
    assert ids.tolist() == [[5, 6, 7, 0], [8, 0, 0, 0]] and mask.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]


def _batches(model: str, multiple: int):
    tokenizer = build_word_tokenizer(SENTENCES)
    sequences = [tokenizer(s, is_split_into_words=True)["input_ids"] for s in SENTENCES]
    out = []
    for pad in (None, multiple):
        args = TrainArguments(out="x", model=model, max_steps=1, mask_rate=0.4, pad_to_multiple=pad)
        objective = build_objective(MODELS[model], args, tokenizer, [0, 2, 3])
        out.append(objective.batch(sequences, torch.Generator().manual_seed(7)))
    return tokenizer, out


def test_padding_on_keeps_the_masks_and_the_masked_positions():
    _, (plain, padded) = _batches("tree-transformer", 16)
    n = plain.input_ids.shape[1]
    assert padded.input_ids.shape == (3, 16) and n == 7
    assert torch.equal(padded.input_ids[:, :n], plain.input_ids) and torch.equal(padded.labels[:, :n], plain.labels)
    assert (padded.attention_mask[:, n:] == 0).all() and (padded.labels[:, n:] == -100).all()
    assert torch.equal(padded.labels.flatten()[padded.masked_positions], plain.labels.flatten()[plain.masked_positions])


@pytest.mark.parametrize(
    "model, overrides",
    [
        ("tree-transformer", {}),
        ("tree-transformer", {"constituent_variant": "official"}),
        ("structformer", {}),
        ("on-lstm", {}),
        ("on-lstm-san", {}),
    ],
)
def test_padded_batches_give_the_loss_and_gradients_of_unpadded_ones(model, overrides):
    tokenizer, batches = _batches(model, 16)
    torch.manual_seed(0)
    net = (
        MODELS[model](make_config(model, "tiny", vocab_size=len(tokenizer), **overrides)).eval().double()
    )  # no dropout
    results = []
    for batch in batches:
        net.zero_grad()
        kw = batch.model_inputs()
        if batch.masked_positions is not None:  # a masked LM: logits at the masked positions only
            kw.update(masked_only=True, masked_positions=batch.masked_positions)
        loss = net(**kw).loss
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in net.parameters() if p.grad is not None]))
    (loss_a, grads_a), (loss_b, grads_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=0, atol=1e-10)
    assert len(grads_a) == len(grads_b) > 0
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-10)
