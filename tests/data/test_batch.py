"""The explicit batches passed to the loss (training/batch.py) and the one model-config resolver
(training/model_config.py)."""

import pytest
import torch

from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.batch import PairBatch, TokenBatch
from syntaxformer.training.model_config import requested_fields, resolve_model_config
from syntaxformer.training.objectives import MaskedLM


def test_token_batch_counts_real_tokens_and_moves_its_structure():
    ids = torch.tensor([[5, 6, 7], [8, 0, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    heads = torch.tensor([[0, 1, 1], [0, 0, 0]])
    batch = TokenBatch(ids, mask, ids.clone(), structure_inputs={"heads": heads})
    assert batch.n_tokens == 4
    moved = batch.to("cpu")
    assert moved is not batch and torch.equal(moved.structure_inputs["heads"], heads)
    kw = batch.model_inputs()
    assert sorted(kw) == ["attention_mask", "input_ids", "labels", "structure_inputs"]
    assert "structure_inputs" not in TokenBatch(ids, mask, ids).model_inputs()


def test_pair_batch_counts_both_sides():
    features = {
        "premise_mask": torch.tensor([[1, 1, 0], [1, 1, 1]]),
        "hypothesis_mask": torch.tensor([[1, 0, 0], [1, 1, 0]]),
        "labels": torch.tensor([2, 0]),
    }
    batch = PairBatch(features)
    assert batch.n_tokens == 5 + 3
    assert batch.labels.tolist() == [2, 0]


def test_the_masked_lm_objective_returns_a_token_batch_without_structure():
    tok = build_word_tokenizer([["a", "b", "c"]])
    objective = MaskedLM(TrainArguments(out="x", max_steps=1), tok, [0, 1, 2, 3, 4])
    batch = objective.batch([[5, 6, 7], [6]], torch.Generator().manual_seed(0))
    assert isinstance(batch, TokenBatch) and batch.structure_inputs is None
    assert batch.attention_mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_the_resolver_adds_objective_and_prior_fields_and_refuses_unknown_ones():
    # the causal LM frames sentences with [CLS] (id 3 in every tokenizer of the package) and parses after it
    assert resolve_model_config("on-lstm", "tiny", 10).parse_prefix_token_id == 3
    # the structural-position prior's own fields are written into the config with their defaults
    config = resolve_model_config("tree-transformer", "tiny", 10, prior="structural-position")
    assert (config.prior, config.structural_max_relative, config.structural_max_depth) == ("structural-position", 8, 16)
    with pytest.raises(InputError, match="no config field hiden_size"):
        resolve_model_config("tree-transformer", "tiny", 10, overrides={"hiden_size": 8})
    with pytest.raises(InputError, match="disagree"):
        requested_fields("none", {"prior": "constituent"})
    assert requested_fields("none", {"dropout": 0.0}) == {"dropout": 0.0, "prior": "none"}
