"""Test data that several test modules write (plain functions; the shared fixtures are in conftest.py).

* a propositional-logic data folder whose relations are computed by truth tables, independent of the
  code under test (:func:`write_logic_folder`);
* SICK-format lines (:data:`SICK_HEADER`, :func:`sick_line`, :data:`SICK_PAIRS`), written as a file by
  the ``sick_file`` fixture;
* the two-layer Tree Transformer of the prior kernels' model tests (:func:`tiny_tree_transformer`);
* inputs of StructFormer's dependency-constrained attention and that attention by a kernel of its table
  (:func:`dependency_attention_inputs`, :func:`dependency_attention`);
* where the repository is (:data:`ROOT`) and where the shared corpora are (:func:`shared_data_folder`).

The test modules live in one folder per subject (``tests/models/``, ``tests/training/``, ...); this module
and ``conftest.py`` sit above them, and ``tests/`` is on the import path (``pyproject.toml``).
"""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

#: the environment variable that moves the shared corpora folder (CI points it at an empty folder to run
#: the tests as a fresh clone without ``../shared`` would)
SHARED_DATA_VARIABLE = "SYNTAXFORMER_SHARED_DATA"
#: the repository's root folder
ROOT = Path(__file__).resolve().parent.parent


def shared_data_folder() -> Path:
    """The shared corpora folder the tests read: ``$SYNTAXFORMER_SHARED_DATA`` where it is set, else
    ``../shared/data`` beside the repository (``/work/shared/data`` in development)."""
    return Path(os.environ.get(SHARED_DATA_VARIABLE) or ROOT.parent / "shared" / "data")


# ------------------------------------------------------------------------------- propositional logic

VARIABLES = "abcdef"
#: every assignment of the 6 variables (64)
ASSIGNMENTS = [dict(zip(VARIABLES, values)) for values in itertools.product((False, True), repeat=6)]
TRAIN_PER_FILE = 12  # train0 .. train6: 84 pairs; every 10th held out: 76 training, 8 validation
TEST_PER_FILE = 5  # test1 .. test12


def random_formula(rng: random.Random, operators: int) -> tuple[list[str], object]:
    """A formula with exactly ``operators`` operators in the data's bracketing (``( not X )``,
    ``( X ( and Y ) )``, ``( X ( or Y ) )``) and its truth function."""
    if operators == 0:
        v = rng.choice(VARIABLES)
        return [v], lambda a, v=v: a[v]
    if rng.random() < 0.3:
        tokens, f = random_formula(rng, operators - 1)
        return ["(", "not", *tokens, ")"], lambda a, f=f: not f(a)
    left_ops = rng.randrange(operators)
    left, f = random_formula(rng, left_ops)
    right, g = random_formula(rng, operators - 1 - left_ops)
    op = rng.choice(("and", "or"))
    if op == "and":
        return ["(", *left, "(", "and", *right, ")", ")"], lambda a, f=f, g=g: f(a) and g(a)
    return ["(", *left, "(", "or", *right, ")", ")"], lambda a, f=f, g=g: f(a) or g(a)


def relation(f, g) -> str:
    """The natural-logic relation of the sets x = {f true}, y = {g true} over the 64 assignments
    (Bowman et al. 2015, Table 1)."""
    x = {i for i, a in enumerate(ASSIGNMENTS) if f(a)}
    y = {i for i, a in enumerate(ASSIGNMENTS) if g(a)}
    universe = set(range(len(ASSIGNMENTS)))
    if x == y:
        return "="
    if x < y:
        return "<"
    if x > y:
        return ">"
    disjoint, exhaustive = not (x & y), (x | y) == universe
    if disjoint and exhaustive:
        return "^"
    if disjoint:
        return "|"
    if exhaustive:
        return "v"
    return "#"


def write_logic_folder(folder: Path, seed: int = 0) -> dict[str, list[str]]:
    """``train0 .. train12`` and ``test0 .. test12`` of random pairs (the longer formula of file N has
    N operators); returns each file's relations."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    relations = {}
    for split, per_file in (("train", TRAIN_PER_FILE), ("test", TEST_PER_FILE)):
        for n in range(13):
            lines, rels = [], []
            for _ in range(per_file):
                left, f = random_formula(rng, n)
                right, g = random_formula(rng, rng.randrange(n + 1))
                if rng.random() < 0.5:
                    (left, f), (right, g) = (right, g), (left, f)
                rel = relation(f, g)
                rels.append(rel)
                lines.append(f"{rel}\t{' '.join(left)}\t{' '.join(right)}\n")
            (folder / f"{split}{n}").write_text("".join(lines))
            relations[f"{split}{n}"] = rels
    return relations


# ------------------------------------------------------------------------------------------------ SICK

SICK_HEADER = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\t"
    "entailment_BA\tsentence_A_original\tsentence_B_original\tsentence_A_dataset\t"
    "sentence_B_dataset\tSemEval_set"
)

#: (premise, hypothesis, SICK label) pairs, two of each label
SICK_PAIRS = [
    ("a man is playing a guitar", "a man is playing an instrument", "ENTAILMENT"),
    ("a man is playing a guitar", "nobody is playing a guitar", "CONTRADICTION"),
    ("a woman is slicing an onion", "a man is cutting a potato", "NEUTRAL"),
    ("the dog is running in the park", "a dog runs", "ENTAILMENT"),
    ("two kids are swimming", "no kid is swimming", "CONTRADICTION"),
    ("a cat sleeps on the sofa", "the cat is eating", "NEUTRAL"),
]


def sick_line(i, a, b, label, split):
    """Line ``i`` of a SICK file: pair ``a`` / ``b`` with ``label`` in the SemEval set ``split``."""
    return f"{i}\t{a}\t{b}\t{label}\t4.5\tA_x_B\tB_x_A\t{a}\t{b}\tFLICKR\tFLICKR\t{split}"


# ------------------------------------------------------------------------------- a tiny Tree Transformer


def tiny_tree_transformer(**fields):
    """A two-layer Tree Transformer for masked LM (width 32, 2 heads, 50 words, the official prior variant),
    its config fields overridden by ``fields`` (``kernel``, the dropouts, ...)."""
    from syntaxformer.models.tree_transformer import TreeTransformerConfig, TreeTransformerForMaskedLM

    config = dict(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        constituent_variant="official",
    )
    return TreeTransformerForMaskedLM(TreeTransformerConfig(**{**config, **fields}))


# ------------------------------------------------------------------ StructFormer's dependency attention


def dependency_attention_inputs(lengths, device, heads=2, n=7, d=16, relations=2, seed=0):
    """Queries, keys and values (B, H, N, d_h) as views of (B, N, H d_h) projections (as the layer makes
    them), a ``p_D`` zero off the sentences' pairs and on the diagonal with some entries below 1e-30, the
    relation logits (H, R), all on ``device`` and requiring gradients, and the key mask (B, N)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    batch = len(lengths)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    qkv = [torch.randn(batch, n, heads * d, generator=g) for _ in range(3)]
    qkv = [t.to(device).view(batch, n, heads, d).transpose(1, 2).requires_grad_() for t in qkv]
    p = torch.rand(batch, n, n, generator=g) * (mask[:, :, None] & mask[:, None, :])
    p = p.masked_fill(torch.eye(n, dtype=torch.bool), 0.0)
    p[0, 1, 2] = p[0, 2, 1] = 1e-31  # weights below 1e-30 (both relations): set to 0, no gradient through them
    logits = torch.randn(heads, relations, generator=g)
    return [*qkv, p.to(device).requires_grad_(), logits.to(device).requires_grad_()], mask.to(device)


def dependency_attention(kernel, inputs, mask, relations, weight_act):
    """``ATTENTION_KERNELS[kernel]`` (:mod:`syntaxformer.models.structformer`) on ``inputs`` of
    :func:`dependency_attention_inputs`: the output (B, H, N, d_h), weights not needed, no dropout."""
    from syntaxformer.blocks.dropout import Dropout
    from syntaxformer.models.structformer import ATTENTION_KERNELS, relation_weights

    q, k, v, p, logits = inputs
    weights = relation_weights(logits, weight_act)
    return ATTENTION_KERNELS[kernel](q, k, v, p, weights, relations, mask, Dropout(0.0), False)[0]
