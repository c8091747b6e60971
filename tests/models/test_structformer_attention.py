"""StructFormer's dependency-constrained attention and its dependency decoder, against references
written from the definitions (DESIGN.md §2, the module docstring of syntaxformer/models/structformer.py).

* ``relation_weights``, ``dependency_structure``, ``dependency_constrained_attention`` and the whole
  ``StructFormerAttention`` module against explicit Python loops over b, h, i, j (float64, random
  inputs, every weight activation and relation set; 1e-12):

      w[h, r]        = softmax_r(logits[h, :]) or sigmoid(logits[h, r])
      rel_head[i, j] = p_D(j | i),  rel_child[i, j] = p_D(i | j),
      rel_sibling[i, j] = sum_k p_D(k | i) p_D(k | j) for i != j, 0 on the diagonal
      a_ij = sigmoid(q_i . k_j / sqrt(d_h)) * sum_r w[h, r] rel_r[i, j]   (0 for a padding key j)
      out_i = sum_j a_ij v_j

* The maximum-spanning-tree heads (Chu-Liu-Edmonds with one root child) of a briefly *trained* tiny
  StructFormer on real ptb-sample sentences of 3-7 words, against a brute-force search over all
  (n+1)^n head assignments that form a single-rooted tree, under the score ``head_scores`` defines:
  ``sum_d log(max(p(head(d) | d), 1e-12))`` with the root column for the root arc.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from syntaxformer.decoding.dependency import is_tree
from syntaxformer.models.structformer import (
    StructFormerAttention,
    StructFormerConfig,
    dependency_constrained_attention,
    dependency_structure,
    relation_weights,
)
from syntaxformer.structures import DecoderOptions

RELATION_SETS = [("head",), ("head", "child"), ("head", "child", "sibling")]
ACTIVATIONS = ["softmax", "sigmoid"]
B, H, N, D_H = 2, 3, 5, 4
#: real words of each sentence of the batch (the second is right-padded)
LENGTHS = [5, 3]


# ---------------------------------------------------------------------------------------------
# references: explicit loops, plain Python floats
# ---------------------------------------------------------------------------------------------


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def ref_weights(logits: np.ndarray, act: str) -> np.ndarray:
    h_count, r_count = logits.shape
    w = np.zeros((h_count, r_count))
    for h in range(h_count):
        if act == "softmax":
            z = sum(math.exp(logits[h, r]) for r in range(r_count))
            for r in range(r_count):
                w[h, r] = math.exp(logits[h, r]) / z
        else:
            for r in range(r_count):
                w[h, r] = sigmoid(logits[h, r])
    return w


def ref_relation(p: np.ndarray, name: str, b: int, i: int, j: int) -> float:
    """rel_name[b, i, j] from p[b, i, j] = p_D(j | i)."""
    if name == "head":
        return p[b, i, j]
    if name == "child":
        return p[b, j, i]
    assert name == "sibling"
    if i == j:
        return 0.0
    return sum(p[b, i, k] * p[b, j, k] for k in range(p.shape[2]))


def ref_structure(p: np.ndarray, w: np.ndarray, relations) -> np.ndarray:
    b_count, n, _ = p.shape
    out = np.zeros((b_count, w.shape[0], n, n))
    for b in range(b_count):
        for h in range(w.shape[0]):
            for i in range(n):
                for j in range(n):
                    out[b, h, i, j] = sum(w[h, r] * ref_relation(p, name, b, i, j) for r, name in enumerate(relations))
    return out


def ref_attention(q, k, v, structure, key_mask):
    """(output [B, H, N, d_h], weights [B, H, N, N]) by loops."""
    b_count, h_count, n, d_h = q.shape
    weights = np.zeros((b_count, h_count, n, n))
    out = np.zeros((b_count, h_count, n, d_h))
    for b in range(b_count):
        for h in range(h_count):
            for i in range(n):
                for j in range(n):
                    if not key_mask[b, j]:
                        continue
                    score = sum(q[b, h, i, c] * k[b, h, j, c] for c in range(d_h)) / math.sqrt(d_h)
                    weights[b, h, i, j] = sigmoid(score) * structure[b, h, i, j]
                for c in range(d_h):
                    out[b, h, i, c] = sum(weights[b, h, i, j] * v[b, h, j, c] for j in range(n))
    return out, weights


def random_p_dep(gen: torch.Generator, zero_padding: bool) -> torch.Tensor:
    """[B, N, N] float64 p_D(j | i): zero diagonal, rows summing to less than 1 (the rest is the
    root mass). With ``zero_padding`` the padded rows/columns are 0 as the model makes them;
    without, padded keys carry mass so that only the key mask can zero them."""
    p = torch.rand(B, N, N, generator=gen, dtype=torch.float64) + 0.05
    p.diagonal(dim1=1, dim2=2).zero_()
    if zero_padding:
        for b, t in enumerate(LENGTHS):
            p[b, t:, :] = 0.0
            p[b, :, t:] = 0.0
    root = torch.rand(B, N, 1, generator=gen, dtype=torch.float64) + 0.1
    return p / (p.sum(-1, keepdim=True) + root)


def key_mask() -> torch.Tensor:
    return torch.arange(N)[None, :] < torch.tensor(LENGTHS)[:, None]  # (B, N) bool


# ---------------------------------------------------------------------------------------------
# the functions against the loops
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("relations", RELATION_SETS, ids="+".join)
@pytest.mark.parametrize("zero_padding", [True, False], ids=["model-padding", "mass-on-padding"])
def test_attention_equals_the_formula_by_loops(act, relations, zero_padding):
    seed = 100 * ACTIVATIONS.index(act) + 10 * RELATION_SETS.index(relations) + zero_padding
    gen = torch.Generator().manual_seed(seed)
    r_count = len(relations)
    logits = torch.randn(H, r_count, generator=gen, dtype=torch.float64) * 1.5
    p = random_p_dep(gen, zero_padding)
    q, k, v = (torch.randn(B, H, N, D_H, generator=gen, dtype=torch.float64) * 2 for _ in range(3))
    mask = key_mask()

    w = relation_weights(logits, act)
    w_ref = ref_weights(logits.numpy(), act)
    assert w.shape == (H, r_count) and w.dtype == torch.float64
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=0, atol=1e-12)
    if act == "softmax":
        np.testing.assert_allclose(w.sum(-1).numpy(), np.ones(H), rtol=0, atol=1e-12)

    structure = dependency_structure(p, w, relations)
    s_ref = ref_structure(p.numpy(), w_ref, relations)
    assert structure.shape == (B, H, N, N)
    np.testing.assert_allclose(structure.numpy(), s_ref, rtol=0, atol=1e-12)

    out, weights = dependency_constrained_attention(q, k, v, structure, mask, nn.Dropout(0.0))
    out_ref, weights_ref = ref_attention(q.numpy(), k.numpy(), v.numpy(), s_ref, mask.numpy())
    assert out.shape == (B, H, N, D_H) and weights.shape == (B, H, N, N)
    np.testing.assert_allclose(weights.numpy(), weights_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.numpy(), out_ref, rtol=0, atol=1e-12)
    # padding keys weigh exactly 0; real keys of real words do not (all inputs are positive here)
    padded = ~mask[:, None, None, :].expand(B, H, N, N)
    assert (weights[padded] == 0).all()
    # every relation has a zero diagonal (p_D(i | i) = 0, the sibling diagonal is cleared), and every
    # other structure entry of the unpadded sentence is positive here
    eye = torch.eye(N, dtype=torch.bool).expand(H, N, N)
    assert (weights[0][eye] == 0).all() and (weights[0][~eye] > 0).all()


def test_relations_by_hand_on_a_three_word_example():
    """Exact numbers by hand: p_D(1|0) = .5, p_D(2|0) = .25, p_D(0|1) = .1, p_D(2|1) = .6,
    p_D(0|2) = .3, p_D(1|2) = .2; one head with weights 1 on a single relation."""
    p = torch.tensor([[[0.0, 0.5, 0.25], [0.1, 0.0, 0.6], [0.3, 0.2, 0.0]]], dtype=torch.float64)
    one = torch.ones(1, 1, dtype=torch.float64)
    np.testing.assert_array_equal(dependency_structure(p, one, ["head"])[0, 0].numpy(), p[0].numpy())
    np.testing.assert_array_equal(dependency_structure(p, one, ["child"])[0, 0].numpy(), p[0].T.numpy())
    # sibling[i, j] = sum_k p_D(k | i) p_D(k | j): (0, 1) = .25 * .6, (0, 2) = .5 * .2, (1, 2) = .1 * .3
    sibling = np.array([[0.0, 0.15, 0.1], [0.0, 0.0, 0.03], [0.0, 0.0, 0.0]])
    sibling = sibling + sibling.T
    np.testing.assert_allclose(dependency_structure(p, one, ["sibling"])[0, 0].numpy(), sibling, rtol=0, atol=1e-15)
    # sigmoid(0) = 1/2 with zero queries: the weights are half the structure, the output its v-sum
    q = torch.zeros(1, 1, 3, 2, dtype=torch.float64)
    v = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]], dtype=torch.float64)
    structure = dependency_structure(p, one, ["head"])
    out, weights = dependency_constrained_attention(
        q, q, v, structure, torch.ones(1, 3, dtype=torch.bool), nn.Dropout(0.0)
    )
    np.testing.assert_allclose(weights[0, 0].numpy(), 0.5 * p[0].numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(out[0, 0].numpy(), [[0.125, 0.375], [0.35, 0.3], [0.15, 0.1]], rtol=0, atol=1e-15)


def test_weights_below_1e_30_become_zero():
    """Documented: attention weights below 1e-30 are set to 0 (no denormals, DESIGN.md §5)."""
    structure = torch.tensor([[[[0.0, 4e-30], [1e-31, 0.5]]]], dtype=torch.float64)  # (1, 1, 2, 2)
    q = torch.zeros(1, 1, 2, 1, dtype=torch.float64)  # sigmoid = 1/2
    v = torch.ones(1, 1, 2, 1, dtype=torch.float64)
    _, weights = dependency_constrained_attention(
        q, q, v, structure, torch.ones(1, 2, dtype=torch.bool), nn.Dropout(0.0)
    )
    np.testing.assert_array_equal(weights[0, 0].numpy(), [[0.0, 2e-30], [0.0, 0.25]])


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("relations", RELATION_SETS, ids="+".join)
def test_attention_module_equals_per_head_loops(act, relations):
    """StructFormerAttention.forward: head h uses columns h*d_h .. (h+1)*d_h of Q, K, V and its own
    row of relation logits; the heads' outputs are concatenated and projected."""
    torch.manual_seed(7)
    config = StructFormerConfig(
        vocab_size=10,
        hidden_size=H * D_H,
        num_attention_heads=H,
        intermediate_size=8,
        num_hidden_layers=1,
        relations=relations,
        weight_act=act,
    )
    module = StructFormerAttention(config).double().eval()
    with torch.no_grad():
        module.relation_logits.normal_(0.0, 1.5)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(B, N, H * D_H, generator=gen, dtype=torch.float64)
    p = random_p_dep(gen, zero_padding=True)
    mask = key_mask()
    with torch.no_grad():
        out, attn = module(x, p, mask)

    def lin(layer, t):
        return t @ layer.weight.detach().numpy().T + layer.bias.detach().numpy()

    xs = x.numpy()
    q, k, v = (lin(module.query, xs), lin(module.key, xs), lin(module.value, xs))  # (B, N, H d_h)

    def split(t):
        return t.reshape(B, N, H, D_H).transpose(0, 2, 1, 3)

    w_ref = ref_weights(module.relation_logits.detach().numpy(), act)
    s_ref = ref_structure(p.numpy(), w_ref, relations)
    heads_out, attn_ref = ref_attention(split(q), split(k), split(v), s_ref, mask.numpy())
    concat = heads_out.transpose(0, 2, 1, 3).reshape(B, N, H * D_H)
    np.testing.assert_allclose(attn.numpy(), attn_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.numpy(), lin(module.output, concat), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# maximum-spanning-tree heads of a trained model against brute force
# ---------------------------------------------------------------------------------------------

EPS = 1e-12  # head_scores' floor before the log


def arc_scores(probs: np.ndarray) -> np.ndarray:
    """``[n+1, n+1]`` with ``s[h, d]`` = log max(p(head h | word d), 1e-12), from the structure's
    ``[n, n+1]`` array (column 0 = root, column h = word h, 1-based)."""
    n = probs.shape[0]
    s = np.full((n + 1, n + 1), -np.inf)
    for d in range(1, n + 1):
        for h in range(n + 1):
            if h != d:
                s[h, d] = math.log(max(float(probs[d - 1, h]), EPS))
    return s


def brute_force_trees(s: np.ndarray):
    """Every head assignment of n words forming a tree with one root child, and its score.

    Enumerates all (n+1)^n assignments (in chunks by the first word's head); returns
    ``(assignments [T, n] 1-based heads, scores [T])`` of the trees."""
    n = s.shape[0] - 1
    rest = np.indices((n + 1,) * (n - 1)).reshape(n - 1, -1).T if n > 1 else np.zeros((1, 0), int)
    all_heads, all_scores = [], []
    for first in range(n + 1):
        heads = np.concatenate([np.full((len(rest), 1), first), rest], axis=1)  # (M, n)
        one_root = (heads == 0).sum(axis=1) == 1
        # follow every word's head n times: a tree sends every word to the root (0)
        padded = np.concatenate([np.zeros((len(heads), 1), dtype=heads.dtype), heads], axis=1)
        at = np.tile(np.arange(1, n + 1), (len(heads), 1))
        for _ in range(n):
            at = np.take_along_axis(padded, at, axis=1)
        tree = one_root & (at == 0).all(axis=1)
        heads = heads[tree]
        score = np.zeros(len(heads))
        for d in range(1, n + 1):
            score += s[heads[:, d - 1], d]
        all_heads.append(heads)
        all_scores.append(score)
    return np.concatenate(all_heads), np.concatenate(all_scores)


def test_brute_force_counts_every_tree():
    """Sanity of the reference: n^(n-1) rooted labelled trees on n words with one root child
    (Cayley: n^(n-2) unrooted trees, times n choices of the root word)."""
    for n in range(1, 6):
        heads, scores = brute_force_trees(np.zeros((n + 1, n + 1)))
        assert len(heads) == n ** (n - 1)
        assert all(is_tree(h.tolist()) for h in heads)
        assert len({tuple(h) for h in heads.tolist()}) == len(heads)


#: the training corpus and the source of the parsed sentences: the dev half of the embedded sample
#: (wsj_0001-0099, 1,921 sentences; its preprocessed words are read once per process and cached)
CORPUS = "ptb-sample:dev"


@pytest.fixture(scope="module")
def trained_structformer(tmp_path_factory):
    """A tiny StructFormer trained for 60 steps (batch 16, seed 0, one thread) on ptb-sample:dev,
    loaded for parsing with ``load_model``."""
    from syntaxformer.parsing import load_model
    from syntaxformer.tasks.run import train

    folder = tmp_path_factory.mktemp("structformer-trained")
    threads = torch.get_num_threads()
    try:
        out = train(
            out=str(folder / "model"),
            model="structformer",
            preset="tiny",
            corpus=CORPUS,
            max_steps=60,
            batch_size=16,
            lr=1e-3,
            valid_fraction=0.0,
            eval_every=0,
            save_every=0,
            seed=0,
            quiet=True,
            threads=1,
        )
    finally:
        torch.set_num_threads(threads)  # the trainer sets the process-wide thread count
    return load_model(out)


def test_mst_heads_of_a_trained_model_are_the_brute_force_maximum(trained_structformer):
    """Chu-Liu-Edmonds (``Structures.heads(DecoderOptions())``) finds a maximum-score single-rooted
    tree on the real output of a trained model, for the first 10 dev sentences of 3-7 words."""
    from syntaxformer.data.corpus import load_corpus
    from syntaxformer.parsing import model_structures

    model, tokenizer, info = trained_structformer
    assert info["steps"] == 60 and info["model"] == "structformer"
    sentences = [words for words in load_corpus(CORPUS) if 3 <= len(words) <= 7][:10]
    assert len(sentences) == 10 and max(map(len, sentences)) == 7
    structures = model_structures(model, tokenizer, sentences)
    unique = not_greedy = 0
    for words, structure in zip(sentences, structures):
        n = len(words)
        probs = structure.dependency_probs
        assert probs.shape == (n, n + 1)
        # every row is a distribution over the root (column 0) and the words
        np.testing.assert_allclose(probs.sum(axis=1), np.ones(n), atol=1e-6)
        heads = structure.heads(DecoderOptions())
        assert is_tree(heads), (words, heads)
        s = arc_scores(probs)
        greedy = s[:, 1:].argmax(axis=0).tolist()  # every word's best head, no tree constraint
        not_greedy += heads != greedy
        mst_score = sum(s[h, d] for d, h in enumerate(heads, 1))
        trees, scores = brute_force_trees(s)
        assert len(trees) == n ** (n - 1)
        best = scores.max()
        assert mst_score == pytest.approx(best, abs=1e-9), (words, heads, trees[scores.argmax()])
        order = np.sort(scores)[::-1]
        if order[0] - order[1] > 1e-9:  # the maximum is unique: the trees themselves agree
            unique += 1
            assert heads == trees[scores.argmax()].tolist(), words
    assert unique >= 5  # most sentences have one best tree, so the tree check is not vacuous
    assert not_greedy >= 1  # some sentence's best heads form no single-rooted tree: CLE has work to do
