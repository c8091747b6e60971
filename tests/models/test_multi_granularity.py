"""Multi-granularity self-attention (Hao et al. 2019; DESIGN.md §3.3): partitions against hand-written
ids, compositions against literal loops, single-word phrases = the plain Transformer, padding
invariance, eager = sdpa, head_mask / prune_heads with mixed granularities, the phrase-label loss."""

import copy

import pytest
import torch
from nltk import Tree

from syntaxformer.models import MODELS, make_config
from syntaxformer.priors import PRIORS, MultiGranularityPrior
from syntaxformer.priors.multi_granularity import (
    PhraseCNN,
    PhraseSelfAttention,
    compose_phrases,
    ngram_partition,
    pad_phrase_ids,
    parse_granularities,
    tree_partition,
    tree_phrases,
)

SENTENCE = Tree.fromstring("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))))")


def test_ngram_partition_is_hand_written():
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    assert ngram_partition(mask, 3).tolist() == [[0, 0, 0, 1, 1, 1, 2], [0, 0, 0, 1, -1, -1, -1]]
    assert ngram_partition(mask, 1).tolist() == [list(range(7)), [0, 1, 2, 3, -1, -1, -1]]
    left = torch.tensor([[False, False, True, True, True]])
    assert ngram_partition(left, 2).tolist() == [[-1, -1, 0, 0, 1]]


def test_tree_partition_is_hand_written():
    assert tree_partition(SENTENCE, 0) == [0] * 6
    assert tree_phrases(SENTENCE, 1) == [(0, 2, "NP"), (2, 6, "VP")]
    assert tree_partition(SENTENCE, 2) == [0, 1, 2, 3, 3, 3]
    assert tree_phrases(SENTENCE, 3) == [(0, 1, "DT"), (1, 2, "NN"), (2, 3, "VBD"), (3, 4, "IN"), (4, 6, "NP")]
    assert tree_partition(SENTENCE, 4) == [0, 1, 2, 3, 4, 5]
    assert tree_partition(SENTENCE, 9) == [0, 1, 2, 3, 4, 5]
    # unlabelled brackets without preterminals: uncovered words become single-word phrases
    spans = [(0, 2), (2, 6), (3, 6), (4, 6)]
    assert tree_phrases(spans, 2, n_words=6) == [(0, 1, None), (1, 2, None), (2, 3, None), (3, 6, None)]
    assert tree_partition(spans, 3, n_words=6) == [0, 1, 2, 3, 4, 4]
    # a unary chain is one span, labelled by its top node
    assert tree_phrases(Tree.fromstring("(S (NP (NN it)) (VP (VBZ rains)))"), 1) == [(0, 1, "NP"), (1, 2, "VP")]
    with pytest.raises(ValueError, match="overlap"):
        tree_partition([(0, 2), (1, 3)], 1, n_words=3)  # crossing brackets are no tree
    assert pad_phrase_ids([[0, 0, 1], [0]], 4).tolist() == [[0, 0, 1, -1], [0, -1, -1, -1]]


def test_granularity_specs():
    assert parse_granularities("word*2,2gram,tree", 4) == ("word", "word", "2gram", "tree")
    assert parse_granularities(None, 4) == ("word", "word", "2gram", "3gram")
    assert parse_granularities(["word", "1gram"], 2) == ("word", "1gram")
    for bad in ("word,phrase", "word*x,2gram", "word", "0gram,word"):
        with pytest.raises(ValueError):
            parse_granularities(bad, 2)
    assert PRIORS["multi-granularity"] is MultiGranularityPrior


def _literal_compose(x, ids, word_fn):
    """Per sentence, per phrase: word_fn(words of the phrase) then element-wise max."""
    B, _, d = x.shape
    P = int(ids.max()) + 1
    out = torch.zeros(B, P, d, dtype=x.dtype)
    for b in range(B):
        for p in range(int(ids[b].max()) + 1):
            words = x[b, ids[b] == p]
            out[b, p] = word_fn(words).max(0).values
    return out


def test_compositions_equal_literal_loops():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    ids = torch.tensor([[0, 0, 1, 1, 1, 2], [0, 1, 1, -1, -1, -1]])
    memory, mask = compose_phrases(x, ids, "max-pool")
    assert mask.tolist() == [[True] * 3, [True, True, False]]
    assert torch.allclose(memory, _literal_compose(x, ids, lambda w: w))
    cnn = PhraseCNN(4).double()

    def cnn_literal(words):
        n = words.shape[0]
        padded = torch.cat([torch.zeros(1, 4, dtype=words.dtype), words, torch.zeros(1, 4, dtype=words.dtype)])
        return torch.stack([cnn.proj(padded[t : t + 3].reshape(-1)) for t in range(n)])

    assert torch.allclose(compose_phrases(x, ids, "cnn", cnn)[0], _literal_compose(x, ids, cnn_literal))
    att = PhraseSelfAttention(4).double()

    def att_literal(words):
        scores = att.query(words) @ att.key(words).T / 2.0
        return torch.softmax(scores, -1) @ att.value(words)

    assert torch.allclose(compose_phrases(x, ids, "attention", att)[0], _literal_compose(x, ids, att_literal))


def _model(granularities, heads=2, **fields):
    config = make_config(
        "tree-transformer",
        "tiny",
        40,
        prior="multi-granularity",
        num_attention_heads=heads,
        mgsa_granularities=granularities,
        **fields,
    )
    return MODELS["tree-transformer"](config).eval()


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("granularities", ["word,1gram", "1gram,1gram"])
def test_single_word_phrases_are_the_plain_transformer(impl, granularities):
    torch.manual_seed(0)
    plain = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", 40, prior="none")).eval()
    model = _model(granularities, mgsa_interaction="none", mgsa_composition="max-pool")
    missing = model.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(".multi_granularity.norm." in k for k in missing)
    for layer in model.tree_transformer.layers:  # the prior's LayerNorm = the attention's
        layer.multi_granularity.norm.load_state_dict(layer.attention_norm.state_dict())
    for m in (plain, model):
        m.config._attn_implementation = impl
    ids = torch.randint(5, 40, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    with torch.no_grad():
        assert torch.allclose(model(ids, mask).logits[mask.bool()], plain(ids, mask).logits[mask.bool()], atol=1e-5)
    # a real granularity changes the output
    other = _model("word,2gram", mgsa_interaction="none")
    other.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(other(ids, mask).logits, plain(ids, mask).logits, atol=1e-3)


def _tree_inputs(partitions, length):
    return {"phrase_ids": pad_phrase_ids(partitions, length)}


@pytest.mark.parametrize("composition", ["max-pool", "cnn", "attention"])
def test_padding_does_not_change_real_tokens(composition):
    torch.manual_seed(0)
    model = _model("word,2gram,3gram,tree", heads=4, mgsa_composition=composition)
    ids = torch.randint(5, 40, (1, 6))
    other = torch.randint(5, 40, (1, 9))
    batch = torch.cat([torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], 1), other])
    mask = torch.tensor([[1] * 6 + [0] * 3, [1] * 9])
    part = tree_partition(SENTENCE, 2)
    with torch.no_grad():
        alone = model(ids, structure_inputs=_tree_inputs([part], 6)).logits
        batched = model(batch, mask, structure_inputs=_tree_inputs([part, [0, 0, 0, 1, 1, 2, 2, 2, 3]], 9)).logits[
            :1, :6
        ]
    assert torch.allclose(alone, batched, atol=1e-5), (alone - batched).abs().max()


def test_eager_and_sdpa_agree_with_gradients():
    torch.manual_seed(0)
    model = _model("word,2gram,tree,word", heads=4, mgsa_composition="cnn")
    ids = torch.randint(5, 40, (2, 8))
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    inputs = _tree_inputs([[0, 0, 1, 1, 1, 2, 3, 3], [0, 1, 1, 2, 2]], 8)
    results = []
    for impl in ("eager", "sdpa"):
        model.zero_grad()
        model.config._attn_implementation = impl
        out = model(ids, mask, labels=ids, structure_inputs=inputs)
        out.loss.backward()
        results.append(
            (out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        )
    assert torch.allclose(results[0][0], results[1][0], atol=1e-5)
    assert results[0][1].keys() == results[1][1].keys()
    assert any("memories.tree" in n for n in results[0][1])
    for name, grad in results[0][1].items():
        assert torch.allclose(grad, results[1][1][name], atol=1e-5), name


def test_head_mask_equals_pruning_with_mixed_granularities(tmp_path):
    torch.manual_seed(0)
    model = _model("word,2gram,word,3gram", heads=4)
    ids = torch.randint(5, 40, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    head_mask = torch.ones(3, 4)
    head_mask[0, [1, 2]] = 0  # a 2gram head and a word head
    head_mask[1, 3] = 0  # the 3gram head
    pruned = copy.deepcopy(model)
    pruned.prune_heads({0: [1, 2], 1: [3]})
    attention = pruned.tree_transformer.layers[0].attention
    assert attention.head_ids == [0, 3]
    prior = pruned.tree_transformer.layers[0].multi_granularity
    out = prior(torch.randn(2, 7, 32), mask.bool())
    assert [(positions, m.heads if m else None) for positions, m in attention.head_groups(out)] == [
        ([0], None),
        ([1], (3,)),
    ]  # the 2gram memory has no head left
    with torch.no_grad():
        masked = model(ids, mask, head_mask=head_mask, output_attentions=True)
        physical = pruned(ids, mask, output_attentions=True)
    real = mask.bool()
    assert torch.allclose(masked.logits[real], physical.logits[real], atol=1e-5)
    assert torch.allclose(masked.attentions[0][:, [0, 3]], physical.attentions[0], atol=1e-6)
    # a memory head's attention is shown over words: rows of real queries sum to 1, padding keys get 0
    rows = physical.attentions[0].sum(-1)  # (B, h, N)
    assert torch.allclose(rows[real[:, None, :].expand(-1, 2, -1)], torch.ones(1), atol=1e-5)
    assert (physical.attentions[0][1, :, :, 4:] == 0).all()
    pruned.save_pretrained(tmp_path)
    reloaded = MODELS["tree-transformer"].from_pretrained(tmp_path).eval()
    assert reloaded.config.mgsa_granularities == "word,2gram,word,3gram"
    with torch.no_grad():
        assert torch.allclose(reloaded(ids, mask).logits, physical.logits, atol=1e-6)


def test_phrase_label_loss_is_weight_times_nll():
    torch.manual_seed(0)
    weight = 0.7
    model = _model("word,tree", mgsa_num_phrase_labels=3, mgsa_phrase_loss_weight=weight)
    ids = torch.randint(5, 40, (2, 6))
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    labels = torch.full((2, 6), -100)
    labels[:, 1] = ids[:, 1]
    labels[0, 4] = ids[0, 4]
    phrase_ids = [tree_partition(SENTENCE, 2), [0, 0, 1, 2]]  # 4 and 3 phrases
    phrase_labels = torch.tensor([[0, 2, 1, -100], [1, 1, -100, -100]])
    captured = []
    hooks = [
        layer.multi_granularity.register_forward_hook(lambda m, a, out: captured.append(out.record))
        for layer in model.tree_transformer.layers
    ]
    inputs = {**_tree_inputs(phrase_ids, 6), "phrase_labels": phrase_labels}
    with_labels = model(ids, mask, labels=labels, structure_inputs=inputs)
    for hook in hooks:
        hook.remove()
    without = model(ids, mask, labels=labels, structure_inputs=_tree_inputs(phrase_ids, 6))
    assert without.loss is not None and len(captured) == 3
    nll = []
    for record in captured:
        logits = record["phrase_logits"].double()  # (2, 4, 3)
        assert logits.shape == (2, 4, 3)
        log_p = torch.log_softmax(logits, -1)
        terms = [-log_p[b, p, c] for b, row in enumerate(phrase_labels.tolist()) for p, c in enumerate(row) if c >= 0]
        nll.append(sum(terms) / len(terms))
    expected = without.loss.double() + weight * sum(nll) / 3
    assert torch.allclose(with_labels.loss.double(), expected, atol=1e-6)
    with_labels.loss.backward()
    assert model.tree_transformer.layers[0].multi_granularity.phrase_classifier.weight.grad.abs().sum() > 0
    # weight 0: no label loss
    model.config.mgsa_phrase_loss_weight = 0.0
    for layer in model.tree_transformer.layers:
        layer.multi_granularity.phrase_loss_weight = 0.0
    again = model(ids, mask, labels=labels, structure_inputs=inputs)
    assert torch.allclose(again.loss, without.loss)
    with pytest.raises(ValueError, match="phrase_ids"):
        model(ids, mask)


def test_trains_from_the_command_line(tmp_path):
    from syntaxformer.cli import main
    from syntaxformer.parsing import load_model

    out = tmp_path / "mg"
    assert (
        main(
            [
                "train",
                "--prior",
                "multi-granularity",
                "--preset",
                "tiny",
                "--corpus",
                "ptb-sample:dev",
                "--max-steps",
                "3",
                "--batch-size",
                "8",
                "--seed",
                "0",
                "--threads",
                "1",
                "--out",
                str(out),
                "--set",
                'mgsa_granularities="word,2gram"',
                "--set",
                'mgsa_composition="cnn"',
            ]
        )
        == 0
    )
    model, _, info = load_model(out)
    assert model.config.prior == "multi-granularity" and info["steps"] == 3
    assert model.config.mgsa_composition == "cnn"
