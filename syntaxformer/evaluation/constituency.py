"""Unlabelled bracket F1: the field's constituency scores (DESIGN.md §4).

Conventions (named in every report by :data:`PROTOCOL`):

- A tree is scored by its **brackets** (:func:`syntaxformer.decoding.spans.brackets`): half-open word
  spans of length >= 2 other than the whole sentence; duplicates from unary chains count once.
- **Sentence-level F1** (PRPN / ON-LSTM / Tree Transformer / StructFormer): per sentence
  ``P = |pred ∩ gold| / |pred|``, ``R = |pred ∩ gold| / |gold|``; if gold is empty ``R = 1``, and if
  prediction is empty too ``P = 1``; ``F1 = 2PR / (P + R)`` (0 when ``P + R = 0``); the mean over all
  sentences, so length-1 and length-2 sentences score 1.
- **Corpus-level F1** (Compound PCFG, "micro"): true positives, predicted and gold brackets summed over
  the corpus (length-1 sentences skipped), then ``F1 = 2PR / (P + R)``.
- **WSJ-10**: the same two scores restricted to sentences of at most 10 words (after punctuation removal).
- **Label recall** (Tree Transformer paper, Table 3): for each gold constituent of length >= 2 other than
  the whole sentence (the spans of the bracket set) and each label part it carries, whether its span is
  among the predicted brackets. Labels are reduced to their base category (``NP-SBJ-1`` -> ``NP``,
  ``ADVP|PRT`` -> ``ADVP``); a label collapsed from a unary chain (``S+VP``) counts once for each part;
  a (span, base label) pair counted once even when a unary chain repeats it. Micro-averaged over the
  corpus.
- **Depth** of a predicted tree: the largest number of constituents of length >= 2 (whole sentence
  included, duplicates once) that contain one word; 0 for a one-word sentence. A right-branching tree
  over ``n >= 2`` words has depth ``n - 1``, a balanced binary tree ``ceil(log2 n)``.

Scores in reports are percentages (0-100); :func:`sentence_f1` returns a fraction (0-1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nltk import Tree

from syntaxformer.data import normalise_word, split_label, strip_function_tag
from syntaxformer.decoding.spans import Span, brackets, labelled_spans
from syntaxformer.errors import InputError

#: The convention every constituency number of this module follows.
PROTOCOL = (
    "unlabelled bracket F1: PRPN sentence-level (mean over sentences) and corpus-level micro "
    "(length-1 sentences skipped); gold preprocessed as PRPN/ON-LSTM (only the 36 word tags "
    "kept: punctuation and traces removed, empty constituents deleted, unary chains "
    "collapsed); whole-sentence and single-word spans excluded, duplicates counted once; "
    "WSJ-10 = at most 10 words"
)

#: Gold labels whose recall is reported (Tree Transformer paper, Table 3).
RECALL_LABELS = ("NP", "VP", "PP", "SBAR", "ADJP", "ADVP")

#: WSJ-10: sentences of at most this many words (after punctuation removal).
WSJ10_MAX_WORDS = 10


def harmonic_f1(precision: float, recall: float) -> float:
    """F1 = ``2PR / (P + R)``, 0 when ``P + R = 0``: fractions in, a fraction out, or percentages in,
    a percentage out. The one F1 formula of the evaluators (constituency, protocols, classification)."""
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def sentence_f1(pred: set[Span], gold: set[Span]) -> float:
    """Sentence-level unlabelled F1 of one sentence, PRPN rule (DESIGN.md §4), as a fraction 0-1.

    Args:
        pred: predicted brackets (spans of length >= 2, whole sentence excluded).
        gold: gold brackets, same convention.

    Returns:
        ``2PR / (P + R)`` with ``P = |pred ∩ gold| / |pred|``, ``R = |pred ∩ gold| / |gold|``;
        ``R = 1`` when gold is empty, ``P = 1`` when both are empty (so two empty sets score 1, and a
        non-empty prediction against an empty gold scores 0); 0 when ``P + R = 0``.
    """
    pred, gold = set(pred), set(gold)
    overlap = len(pred & gold)
    if not gold:
        recall = 1.0
        precision = 1.0 if not pred else overlap / len(pred)
    else:
        recall = overlap / len(gold)
        precision = overlap / len(pred) if pred else 0.0
    return harmonic_f1(precision, recall)


def corpus_f1(true_positives: int, n_pred: int, n_gold: int) -> float:
    """Corpus-level (micro) F1 from summed counts, as a fraction 0-1 (Compound PCFG convention).

    Returns 0 when there is no predicted or no gold bracket at all (P or R undefined), or P + R = 0.
    """
    if n_pred == 0 or n_gold == 0 or true_positives == 0:
        return 0.0
    return harmonic_f1(true_positives / n_pred, true_positives / n_gold)


def base_labels(label: str) -> list[str]:
    """Base categories carried by a (possibly collapsed) treebank label, with the readers' rules
    (:func:`~syntaxformer.data.split_label`, :func:`~syntaxformer.data.strip_function_tag`).

    ``"NP-SBJ-1"`` -> ``["NP"]``; ``"S+VP"`` -> ``["S", "VP"]``; ``"ADVP|PRT"`` -> ``["ADVP"]``
    (the first of the Penn Treebank's alternative labels).
    """
    return [strip_function_tag(part).split("|")[0] or part for part in split_label(label)]


def predicted_brackets(spans, n: int) -> set[Span]:
    """The brackets a set of predicted half-open spans over ``n`` words scores: spans of length >= 2
    other than the whole sentence ``(0, n)`` (DESIGN.md §4)."""
    return {(i, j) for i, j in spans if j - i >= 2 and (i, j) != (0, n)}


def _brackets_of(spans: list[tuple[int, int, str]]) -> set[Span]:
    """Brackets from :func:`labelled_spans` output (its first entry is the root ``(0, n)``)."""
    n = spans[0][1]
    return {(i, j) for i, j, _ in spans if j - i >= 2 and (i, j) != (0, n)}


def gold_labelled_brackets(tree: Tree | list[tuple[int, int, str]]) -> set[tuple[int, int, str]]:
    """``(start, end, base_label)`` for every gold constituent in the bracket set (see module doc).

    Single-word spans and the whole sentence are excluded, as in :func:`brackets`; a label collapsed
    from a unary chain gives one entry per part; repeated (span, label) pairs count once. Accepts a
    tree or its :func:`labelled_spans`.
    """
    spans = labelled_spans(tree) if isinstance(tree, Tree) else tree
    n = spans[0][1]
    out = set()
    for i, j, label in spans:
        if j - i >= 2 and (i, j) != (0, n):
            for base in base_labels(label):
                out.add((i, j, base))
    return out


@dataclass(frozen=True)
class GoldBrackets:
    """What the scores need of one preprocessed gold tree, read once by :func:`read_gold_brackets` and
    shared by every prediction scored against it (a model, its layers, the baselines).

    Attributes:
        n: words.
        brackets: the gold brackets (half-open spans of length >= 2 other than the whole sentence).
        recall_spans: ``(start, end, base label)`` of :func:`gold_labelled_brackets` whose base label
            is one of :data:`RECALL_LABELS` (label recall).
    """

    n: int
    brackets: frozenset[Span]
    recall_spans: frozenset[tuple[int, int, str]]


def read_gold_brackets(gold_trees: Sequence[Tree]) -> list[GoldBrackets]:
    """:class:`GoldBrackets` of each preprocessed gold tree, in order (one walk of each tree)."""
    read = []
    for tree in gold_trees:
        spans = labelled_spans(tree)
        recall = frozenset(x for x in gold_labelled_brackets(spans) if x[2] in RECALL_LABELS)
        read.append(GoldBrackets(spans[0][1], frozenset(_brackets_of(spans)), recall))
    return read


def depth_of_brackets(spans: set[Span], n: int) -> int:
    """Depth (module docstring) of the tree over ``n`` words whose brackets are ``spans``."""
    if n < 2:
        return 0
    delta = [0] * (n + 1)
    for i, j in spans | {(0, n)}:
        delta[i] += 1
        delta[j] -= 1
    depth = best = 0
    for change in delta[:n]:
        depth += change
        best = max(best, depth)
    return best


def bracket_depth(tree: Tree) -> int:
    """Depth of a tree: the most constituents of length >= 2 (whole sentence included, duplicate spans
    once) containing one word; 0 for a one-word sentence. See the module docstring."""
    return depth_of_brackets(brackets(tree), len(tree.leaves()))


def check_aligned(
    pred_trees: Sequence[Tree], gold_trees: Sequence[Tree], normalise: Callable[[str], str] | None = None
) -> None:
    """Check that predicted and gold trees are the same sentences, in the same order.

    Predicted and gold leaves are both passed through ``normalise`` (default: the readers'
    ``normalise_word``, the rule gold was preprocessed with) before comparison.

    Raises:
        InputError: the numbers of trees differ, or sentence k (1-based) differs in length or in a
            word; the message names the sentence, the position and both words.
    """
    if len(pred_trees) != len(gold_trees):
        raise InputError(
            f"the prediction has {len(pred_trees)} sentences but the gold has "
            f"{len(gold_trees)} (sentences are aligned by order)",
            sentence=min(len(pred_trees), len(gold_trees)) + 1,
        )
    normalise = normalise or normalise_word
    for k, (pred, gold) in enumerate(zip(pred_trees, gold_trees), start=1):
        pred_words, gold_words = pred.leaves(), gold.leaves()
        for position, (p, g) in enumerate(zip(pred_words, gold_words), start=1):
            if normalise(p) != normalise(g):
                raise InputError(f"word {position} differs: predicted {p!r}, gold {g!r}", sentence=k)
        if len(pred_words) != len(gold_words):
            shorter = min(len(pred_words), len(gold_words))
            p = pred_words[shorter] if shorter < len(pred_words) else "<end>"
            g = gold_words[shorter] if shorter < len(gold_words) else "<end>"
            raise InputError(
                f"predicted {len(pred_words)} words, gold {len(gold_words)}; word "
                f"{shorter + 1}: predicted {p!r}, gold {g!r}",
                sentence=k,
            )


def evaluate_constituency(
    pred_trees: Sequence[Tree],
    gold_trees: Sequence[Tree],
    normalise: Callable[[str], str] | None = None,
    read: Sequence[GoldBrackets] | None = None,
) -> dict:
    """Score predicted trees against preprocessed gold trees (DESIGN.md §4; module docstring).

    Args:
        pred_trees: predicted trees, leaves are words (punctuation-free, as gold), labels ignored;
            with or without a preterminal over each word (same brackets, same scores).
        gold_trees: gold trees after the field's preprocessing (``preprocess_tree``), same order.
        normalise: word rule applied to both leaves before the alignment check (default: the
            readers' ``normalise_word``).
        read: the gold trees' :func:`read_gold_brackets`, where the caller scores several
            predictions against the same gold (default: read here).

    Returns:
        ``{"sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1"}`` in percent (0-100),
        ``"n_sentences"``, ``"n_wsj10"``, ``"label_recall"`` ({label: percent or None when the gold
        has none}), ``"label_counts"`` ({label: number of gold spans}), ``"mean_depth"`` (of the
        predicted trees), ``"protocol"``.

    Raises:
        InputError: see :func:`check_aligned`.
    """
    check_aligned(pred_trees, gold_trees, normalise)
    return score_brackets([brackets(tree) for tree in pred_trees], gold_trees if read is None else read)


def score_brackets(pred_brackets: Sequence[set[Span]], gold_trees: Sequence[Tree] | Sequence[GoldBrackets]) -> dict:
    """The scores of :func:`evaluate_constituency` from predicted span sets, with no word check.

    For callers that already hold spans over the gold words (decoders, baselines, training-time
    evaluation). Spans of length < 2 and the whole-sentence span in ``pred_brackets`` are ignored.

    Args:
        pred_brackets: one set of half-open spans per gold tree, over that tree's words.
        gold_trees: gold trees after the field's preprocessing, same order, or their
            :func:`read_gold_brackets`.

    Returns:
        the dict of :func:`evaluate_constituency`.

    Raises:
        ValueError: the two sequences differ in length (a programming error: check the input with
            :func:`check_aligned` first).
    """
    if len(pred_brackets) != len(gold_trees):
        raise ValueError(f"{len(pred_brackets)} predicted span sets for {len(gold_trees)} gold trees")
    f1_all, f1_wsj10 = [], []
    counts_all, counts_wsj10 = [0, 0, 0], [0, 0, 0]  # true positives, predicted, gold
    found = dict.fromkeys(RECALL_LABELS, 0)
    total = dict.fromkeys(RECALL_LABELS, 0)
    depths = []
    read = gold_trees if gold_trees and isinstance(gold_trees[0], GoldBrackets) else read_gold_brackets(gold_trees)
    for pred_spans, gold_read in zip(pred_brackets, read):
        n, gold = gold_read.n, gold_read.brackets
        pred = predicted_brackets(pred_spans, n)
        score = sentence_f1(pred, gold)
        f1_all.append(score)
        if n <= WSJ10_MAX_WORDS:
            f1_wsj10.append(score)
        if n > 1:
            for counts in [counts_all, counts_wsj10] if n <= WSJ10_MAX_WORDS else [counts_all]:
                counts[0] += len(pred & gold)
                counts[1] += len(pred)
                counts[2] += len(gold)
        for i, j, label in gold_read.recall_spans:
            total[label] += 1
            found[label] += (i, j) in pred
        depths.append(depth_of_brackets(pred, n))

    def mean(values):
        return 100 * sum(values) / len(values) if values else 0.0

    return {
        "sentence_f1": mean(f1_all),
        "corpus_f1": 100 * corpus_f1(*counts_all),
        "wsj10_sentence_f1": mean(f1_wsj10),
        "wsj10_corpus_f1": 100 * corpus_f1(*counts_wsj10),
        "n_sentences": len(f1_all),
        "n_wsj10": len(f1_wsj10),
        "label_recall": {
            label: (100 * found[label] / total[label] if total[label] else None) for label in RECALL_LABELS
        },
        "label_counts": total,
        "mean_depth": sum(depths) / len(depths) if depths else 0.0,
        "protocol": PROTOCOL,
    }


def bracket_scores(pred_spans: Sequence[set[Span]], gold_brackets: Sequence[set[Span]], lengths: Sequence[int]) -> dict:
    """Sentence-level and corpus-level unlabelled F1 (percent, 0-100) of span sets against gold brackets.

    The two headline numbers of :func:`score_brackets` (computed by it, with no gold labels), with
    the gold brackets computed once by the caller: a training-time evaluation
    (:class:`~syntaxformer.evaluation.curve.ParseCurve`) or a decoder sweep runs it many times over the
    same gold.

    Args:
        pred_spans: one set of half-open spans per sentence (any length; lengths < 2 and the whole
            sentence are ignored).
        gold_brackets: the gold brackets (:func:`~syntaxformer.decoding.spans.brackets`) per sentence.
        lengths: words per sentence.
    Returns:
        ``{"sentence_f1": float, "corpus_f1": float}`` in percent.
    Raises:
        ValueError: the three sequences differ in length (a programming error).
    """
    read = [GoldBrackets(n, frozenset(gold), frozenset()) for gold, n in zip(gold_brackets, lengths, strict=True)]
    scores = score_brackets(pred_spans, read)
    return {"sentence_f1": scores["sentence_f1"], "corpus_f1": scores["corpus_f1"]}
