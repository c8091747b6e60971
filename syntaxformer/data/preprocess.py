"""The field's preprocessing of gold Penn Treebank trees, as one function with named switches.

The default, :data:`PRPN`, is the setting of PRPN (Shen et al., ICLR 2018, ``data_ptb.py``),
ON-LSTM (Shen et al., ICLR 2019) and the Tree Transformer (Wang et al., EMNLP 2019) evaluations
(DESIGN.md §4): keep only leaves whose POS tag is one of the 36 word tags, delete constituents left
empty, collapse unary chains, lower-case words, and turn every word containing a digit into ``N``.

Word normalisation is one rule, :func:`normalise_word`, applied to gold leaves, to predicted
leaves and to raw training text, so the three always agree.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

from nltk import Tree

from syntaxformer.data.treebank import read_treebank
from syntaxformer.decoding.spans import PRETERMINAL

logger = logging.getLogger(__name__)

#: The 36 Penn Treebank word tags (DESIGN.md §4; PRPN ``data_ptb.py`` ``word_tags``). Leaves with
#: any other tag — punctuation ``, . : `` '' -LRB- -RRB-``, ``$``, ``#``, ``-NONE-`` traces —
#: are removed by the ``word_tags`` switch.
WORD_TAGS = frozenset(
    """
    CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM TO UH
    VB VBD VBG VBN VBP VBZ WDT WP WP$ WRB
""".split()
)
assert len(WORD_TAGS) == 36

#: Labels of an outer root bracket that :func:`preprocess_tree` removes when it has one child:
#: the Penn Treebank's unlabelled ``( (S ...) )``, and ``ROOT`` / ``TOP`` of other tools.
ROOT_LABELS = frozenset({"", "ROOT", "TOP"})

_DIGIT = re.compile(r"\d")
_FUNCTION_TAG = re.compile(r"[-=]")


@dataclass(frozen=True)
class Preprocessing:
    """Named switches of the gold-tree preprocessing; the defaults are the PRPN setting.

    Attributes:
        word_tags: keep only leaves whose preterminal tag is in :data:`WORD_TAGS` (drops
            punctuation, ``-NONE-`` traces, ``$``, ``#``). Source: PRPN ``data_ptb.py``.
        delete_empty: delete constituents left with no word (e.g. a ``NP-SBJ`` holding only a
            trace). Source: PRPN ``tree2list`` (drops children that become ``[]``).
        collapse_unary: merge a phrasal node whose only child is a phrasal node into one node
            labelled ``OUTER+INNER`` (nltk's ``collapse_unary`` convention, outer label first), e.g.
            ``(S (VP ...))`` -> ``(S+VP ...)``. Preterminals are never merged, so ``(NP (NN dog))``
            stays and ``tree.pos()`` still gives the tags. The span is unchanged, so bracket F1 is
            unaffected; per-label recall counts a ``S+VP`` span for each of ``S`` and ``VP``
            (see :func:`split_label`). Source: PRPN ``tree2list`` (a node with one child is
            replaced by that child).
        lowercase: lower-case every word. Source: PRPN ``filter_words``; Mikolov's PTB text.
        digits_to_n: a word containing a digit becomes ``N`` (``61`` -> ``N``, ``1.5`` -> ``N``,
            ``mid-1980s`` -> ``N``). Source: the Tree Transformer public code (DESIGN.md §1.2).
            Note: PRPN replaces each *run* of digits (``1.5`` -> ``N.N``), and Mikolov's text keeps
            some words with digits (``30-year``, ``1980s``); neither changes the spans, only the
            word strings.
        strip_function_tags: remove function tags and indices from phrasal labels
            (``NP-SBJ-1`` -> ``NP``, ``PP-CLR`` -> ``PP``, ``NP=2`` -> ``NP``); labels that start
            with ``-`` (``-NONE-``, ``-LRB-``, ``-RRB-``) are kept intact.
    """

    word_tags: bool = True
    delete_empty: bool = True
    collapse_unary: bool = True
    lowercase: bool = True
    digits_to_n: bool = True
    strip_function_tags: bool = True


#: The PRPN / ON-LSTM / Tree Transformer preprocessing (every switch on).
PRPN = Preprocessing()


def normalise_word(word: str, lowercase: bool = True, digits_to_n: bool = True) -> str:
    """The one word-normalisation rule: gold leaves, predicted leaves and raw text all use it.

    Args:
        word: one word.
        lowercase: lower-case it.
        digits_to_n: if it contains a digit, return ``"N"`` (Tree Transformer code).

    Returns:
        The normalised word. Mikolov's placeholders ``<unk>`` and ``N`` are left as they are (the
        exact word ``N`` is never lower-cased), so the rule is idempotent and Mikolov's PTB text
        matches normalised gold leaves. (The word ``N`` does not occur in ptb-sample.)
    """
    if word == "N" or (digits_to_n and _DIGIT.search(word)):
        return "N"
    return word.lower() if lowercase else word


def strip_function_tag(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``PP-CLR`` -> ``PP``, ``NP=2`` -> ``NP``; ``-NONE-`` unchanged."""
    if not label or label.startswith("-"):
        return label
    return _FUNCTION_TAG.split(label, maxsplit=1)[0] or label


def split_label(label: str) -> list[str]:
    """The labels of a node made by collapsing a unary chain: ``"S+VP"`` -> ``["S", "VP"]``."""
    return label.split("+")


def _is_preterminal(node: Tree) -> bool:
    """A POS node: exactly one child, a word (the Penn Treebank's ``(NN dog)``)."""
    return len(node) == 1 and not isinstance(node[0], Tree)


def preprocess_tree(tree: Tree, options: Preprocessing = PRPN) -> Tree | None:
    """Clean one gold tree as the field does (DESIGN.md §4); ``tree`` is not modified.

    Steps: remove an outer root bracket labelled ``""``, ``ROOT`` or ``TOP`` that has a single
    child; then, as ``options`` say, drop leaves whose tag is not a word tag, delete constituents
    left empty, strip function tags, collapse unary chains of phrasal nodes (``S+VP``, outer label
    first) and normalise words with :func:`normalise_word`. Preterminals such as ``(NN dog)`` are
    kept. A *preterminal* is a node with exactly one child, a word; its label is the word's tag.
    A word with no tag is kept and normalised: a word beside other children (a predicted tree in the
    internal form, ``(X the dog)``), or a word under a preterminal labelled
    :data:`~syntaxformer.decoding.spans.PRETERMINAL` ``X`` that has siblings (the same tree in the
    field's form, ``(X (X the) (X dog))``, as ``syntaxformer parse`` writes it; ``X`` is no Penn
    Treebank part-of-speech tag), which loses that preterminal: both forms of a predicted tree give
    the same cleaned tree. This function is meant for gold trees: with ``word_tags`` on, a one-word
    predicted tree ``(S dog)`` is read as a preterminal with the non-word tag ``S`` and dropped.

    Returns:
        The cleaned tree, or ``None`` if no word is left (e.g. a sentence of only punctuation).
    """
    while isinstance(tree, Tree) and tree.label() in ROOT_LABELS and len(tree) == 1 and isinstance(tree[0], Tree):
        tree = tree[0]
    cleaned = _clean(tree, options)
    if cleaned is None or not cleaned.leaves():
        return None
    return cleaned


def _clean(node, options: Preprocessing):
    """The cleaned copy of ``node``, or None when it is deleted; a preterminal ``X`` beside other
    children (a word with no tag, :func:`preprocess_tree`) becomes its bare word."""
    if not isinstance(node, Tree):
        return normalise_word(node, options.lowercase, options.digits_to_n)
    if len(node) > 1:  # the field's form of a predicted tree: (X (X the) (X dog)) -> (X the dog)
        untagged = [isinstance(c, Tree) and _is_preterminal(c) and c.label() == PRETERMINAL for c in node]
        node = Tree(node.label(), [c[0] if bare else c for c, bare in zip(node, untagged)])
    label = node.label()
    if options.strip_function_tags:
        label = strip_function_tag(label)
    if _is_preterminal(node):
        if options.word_tags and node.label() not in WORD_TAGS:
            return None
        return Tree(label, [_clean(node[0], options)])
    children = [c for c in (_clean(child, options) for child in node) if c is not None]
    if options.delete_empty and not children:
        return None
    if (
        options.collapse_unary
        and len(children) == 1
        and isinstance(children[0], Tree)
        and not _is_preterminal(children[0])
        and len(children[0]) > 0
    ):
        child = children[0]
        return Tree(f"{label}+{child.label()}", list(child))
    return Tree(label, children)


class GoldTrees(list):
    """The preprocessed gold trees of a treebank: a ``list`` of ``nltk.Tree``, plus bookkeeping.

    Attributes:
        source: what was read (``"ptb-sample"`` or a path).
        options: the :class:`Preprocessing` used.
        numbers: for each kept tree, its 1-based sentence number in the input (file order).
        skipped: 1-based sentence numbers of the input trees left with no word after
            preprocessing, which cannot be scored and are excluded (a warning names them).
        n_input: how many trees the input held (``len(self) + len(self.skipped)``).
    """

    def __init__(self, trees, source: str, options: Preprocessing, numbers: list[int], skipped: list[int]):
        super().__init__(trees)
        self.source = source
        self.options = options
        self.numbers = tuple(numbers)
        self.skipped = tuple(skipped)
        self.n_input = len(numbers) + len(skipped)

    @classmethod
    def joined(cls, first: GoldTrees, second: GoldTrees, source: str) -> GoldTrees:
        """The gold trees of ``first``'s input followed by ``second``'s, as :func:`load_gold_trees` reads
        the treebank ``source`` that is those two inputs in that order (ptb-sample: its dev half, then
        its test half): the same trees (shared, not copied), sentence numbers counted on.

        Raises:
            ValueError: the two were preprocessed with different options.
        """
        if first.options != second.options:
            raise ValueError("gold trees preprocessed with different options cannot be joined")
        offset = first.n_input
        return cls(
            [*first, *second],
            source,
            first.options,
            [*first.numbers, *(n + offset for n in second.numbers)],
            [*first.skipped, *(n + offset for n in second.skipped)],
        )


def load_gold_trees(source: str | os.PathLike, options: Preprocessing = PRPN) -> GoldTrees:
    """Read a treebank (:func:`~syntaxformer.data.treebank.read_treebank`) and preprocess each tree.

    Args:
        source: ``"ptb-sample"``, a file, a folder or a glob.
        options: the preprocessing switches (default :data:`PRPN`).

    Returns:
        A :class:`GoldTrees` list. Trees left with no word are excluded; their 1-based input
        sentence numbers are in ``.skipped`` and a warning names them (nothing is dropped
        silently). On ``ptb-sample`` with :data:`PRPN` no tree is skipped: 3,914 trees.

    Raises:
        InputError: as :func:`~syntaxformer.data.treebank.read_treebank`.
    """
    trees, numbers, skipped = [], [], []
    for number, raw in enumerate(read_treebank(source), start=1):
        tree = preprocess_tree(raw, options)
        if tree is None:
            skipped.append(number)
        else:
            trees.append(tree)
            numbers.append(number)
    if skipped:
        shown = ", ".join(map(str, skipped[:20])) + (" ..." if len(skipped) > 20 else "")
        logger.warning(
            "%s: %d sentence(s) have no word left after preprocessing and are excluded: %s",
            os.fspath(source),
            len(skipped),
            shown,
        )
    return GoldTrees(trees, os.fspath(source), options, numbers, skipped)
