"""The one masked-LM output and loss (blocks/mlm_head.py): the index-list gather equals the boolean-mask
gather bit for bit, the empty selection keeps its zero, and the training batch carries the list."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from syntaxformer.blocks.mlm_head import labelled_positions, masked_lm_output
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.models import MODELS, make_config
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.objectives import MaskedLM


def _labels(generator: torch.Generator, shape=(4, 9), rate=0.3) -> torch.Tensor:
    ids = torch.randint(5, 40, shape, generator=generator)
    return torch.where(torch.rand(shape, generator=generator) < rate, ids, torch.full_like(ids, -100))


def _boolean_mask_reference(hidden, lm_head, labels):
    """The literal formula: ``hidden[labels != -100]`` through the output layer, mean cross-entropy."""
    selected = labels != -100
    logits = lm_head(hidden[selected])
    loss = F.cross_entropy(logits, labels[selected]) if selected.any() else logits.sum() * 0.0
    return logits, loss


def test_labelled_positions_are_the_flat_row_major_indices():
    labels = torch.tensor([[-100, 7, -100, 8], [9, -100, -100, -100], [-100, -100, -100, 4]])
    assert labelled_positions(labels).tolist() == [1, 3, 4, 11]
    assert labelled_positions(labels).dtype == torch.long
    assert labelled_positions(torch.full((2, 3), -100)).tolist() == []
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        labels = _labels(generator)
        hidden = torch.randn(*labels.shape, 6, generator=generator)
        gathered = hidden.reshape(-1, 6)[labelled_positions(labels)]
        assert torch.equal(gathered, hidden[labels != -100])  # the boolean-mask order


@pytest.mark.parametrize("given", [True, False])
def test_masked_only_equals_the_boolean_mask_gather_bit_for_bit(given):
    generator = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    lm_head = nn.Linear(6, 40)
    labels = _labels(generator)
    hidden = torch.randn(*labels.shape, 6, generator=generator)
    h_ref, h_new = hidden.clone().requires_grad_(), hidden.clone().requires_grad_()
    ref_logits, ref_loss = _boolean_mask_reference(h_ref, lm_head, labels)
    ref_loss.backward()
    ref_grads = [h_ref.grad] + [p.grad.clone() for p in lm_head.parameters()]
    lm_head.zero_grad()
    positions = labelled_positions(labels) if given else None
    logits, loss = masked_lm_output(h_new, lm_head, labels, masked_only=True, masked_positions=positions)
    loss.backward()
    assert logits.shape == (int((labels != -100).sum()), 40)
    assert torch.equal(logits, ref_logits) and torch.equal(loss, ref_loss)
    for ours, theirs in zip([h_new.grad] + [p.grad for p in lm_head.parameters()], ref_grads):
        assert torch.equal(ours, theirs)


def test_no_labelled_position_gives_a_zero_that_keeps_the_graph():
    lm_head = nn.Linear(6, 40)
    hidden = torch.randn(2, 5, 6, requires_grad=True)
    empty = torch.full((2, 5), -100)
    for positions in (None, labelled_positions(empty)):
        logits, loss = masked_lm_output(hidden, lm_head, empty, masked_only=True, masked_positions=positions)
        assert logits.shape == (0, 40) and loss.item() == 0.0 and loss.requires_grad
        loss.backward()
        assert torch.equal(hidden.grad, torch.zeros_like(hidden))
        assert torch.equal(lm_head.weight.grad, torch.zeros_like(lm_head.weight))
    logits, loss = masked_lm_output(hidden, lm_head, empty)  # the full path: zero too ...
    assert logits.shape == (2, 5, 40) and loss.item() == 0.0 and loss.requires_grad
    _, loss = masked_lm_output(hidden, lm_head, empty, zero_when_empty=False)  # ... or the cross-entropy's NaN
    assert torch.isnan(loss)


def test_full_path_ignores_unlabelled_positions_and_without_labels_gives_no_loss():
    torch.manual_seed(2)
    lm_head = nn.Linear(6, 40)
    labels = torch.tensor([[-100, 3, 7], [5, -100, -100]])
    hidden = torch.randn(2, 3, 6)
    logits, loss = masked_lm_output(hidden, lm_head, labels)
    assert torch.equal(logits, lm_head(hidden))
    expected = F.cross_entropy(logits[labels != -100], labels[labels != -100])
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-6)
    logits, loss = masked_lm_output(hidden, lm_head, None)
    assert logits.shape == (2, 3, 40) and loss is None
    with pytest.raises(ValueError, match="masked_only=True needs labels"):
        masked_lm_output(hidden, lm_head, None, masked_only=True)


@pytest.mark.parametrize("name", ["tree-transformer", "structformer", "on-lstm-san"])
def test_each_masked_lm_gives_the_same_output_with_or_without_the_index_list(name):
    torch.manual_seed(0)
    model = MODELS[name](make_config(name, "tiny", 40)).eval()
    generator = torch.Generator().manual_seed(3)
    labels = _labels(generator, (3, 7))
    ids = torch.randint(5, 40, (3, 7), generator=generator)
    with torch.no_grad():
        computed = model(ids, torch.ones_like(ids), labels=labels, masked_only=True)
        carried = model(
            ids, torch.ones_like(ids), labels=labels, masked_only=True, masked_positions=labelled_positions(labels)
        )
        full = model(ids, torch.ones_like(ids), labels=labels)
    assert torch.equal(carried.logits, computed.logits) and torch.equal(carried.loss, computed.loss)
    torch.testing.assert_close(carried.logits, full.logits[labels != -100], rtol=0, atol=1e-5)


def test_the_masked_lm_batch_carries_its_labelled_positions():
    tok = build_word_tokenizer([["a", "b", "c"]])
    objective = MaskedLM(TrainArguments(out="x", max_steps=1), tok, [0, 1, 2, 3, 4])
    batch = objective.batch([[5, 6, 7, 5, 6], [6, 7], [7]], torch.Generator().manual_seed(0))
    expected = [b * 5 + t for b in range(3) for t in range(5) if batch.labels[b, t] != -100]
    assert batch.masked_positions.tolist() == expected and len(expected) >= 3  # one per sentence at least
    assert batch.masked_positions.dtype == torch.long
    assert torch.equal(batch.to("cpu").masked_positions, batch.masked_positions)


def test_the_trainer_hands_the_batch_index_list_to_the_model(tmp_path, monkeypatch):
    from syntaxformer.models.tree_transformer import TreeTransformerForMaskedLM
    from syntaxformer.tasks.run import train

    calls = []
    forward = TreeTransformerForMaskedLM.forward

    def spy(self, *args, **kwargs):  # a signature without masked_only: the capability is declared, not read
        calls.append(kwargs)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(TreeTransformerForMaskedLM, "forward", spy)
    train(out=str(tmp_path), model="tree-transformer", preset="tiny", max_steps=2, batch_size=8, quiet=True,
          eval_every=0, save_every=0, threads=1)  # fmt: skip
    assert len(calls) > 2  # the training steps and the validation batches
    for kwargs in calls:
        assert kwargs["masked_only"] is True
        assert torch.equal(kwargs["masked_positions"], labelled_positions(kwargs["labels"]))
