"""Tree and dependency decoders: the one place where model outputs become structures.

* :mod:`.spans` - spans <-> bracketed trees (the internal form and the field's form, with a preterminal
  over each word), brackets, the top-down split by syntactic distance.
* :mod:`.tree_transformer` - Tree Transformer Algorithm 1 and the single-layer decoder.
* :mod:`.ensemble` - several parsers' trees and heads -> the tree (and heads) they agree on most.
* :mod:`.dependency` - Chu-Liu-Edmonds (single root) and the public StructFormer argmax rule.
"""

from .dependency import argmax_heads, chu_liu_edmonds, head_scores, is_tree, tree_score
from .ensemble import BASELINE_VOTERS, TIE_RULE, ensemble_spans, head_vote, mbr_tree, span_votes
from .spans import (
    PRETERMINAL,
    Span,
    brackets,
    escape_word,
    labelled_spans,
    left_branching,
    right_branching,
    spans_to_tree,
    split_by_distance,
    to_bracketed,
    tree_distances,
    with_preterminals,
)
from .tree_transformer import (
    DEFAULT_MIN_LAYER,
    DEFAULT_THRESHOLD,
    OFFICIAL_DESCEND_THRESHOLD,
    algorithm1,
    resolve_min_layer,
    single_layer,
)

__all__ = [
    "Span",
    "labelled_spans",
    "brackets",
    "spans_to_tree",
    "with_preterminals",
    "PRETERMINAL",
    "escape_word",
    "to_bracketed",
    "split_by_distance",
    "tree_distances",
    "right_branching",
    "left_branching",
    "BASELINE_VOTERS",
    "algorithm1",
    "single_layer",
    "resolve_min_layer",
    "DEFAULT_THRESHOLD",
    "DEFAULT_MIN_LAYER",
    "OFFICIAL_DESCEND_THRESHOLD",
    "span_votes",
    "mbr_tree",
    "ensemble_spans",
    "head_vote",
    "TIE_RULE",
    "chu_liu_edmonds",
    "argmax_heads",
    "head_scores",
    "tree_score",
    "is_tree",
]
