"""Trees drawn as images (matplotlib only, no Tk) and as text for the terminal.

* :func:`plot_tree` -- one ``nltk.Tree`` as a picture: words along the bottom in order, each
  node one row above its children (root on top), midway between its first and last child (the paper's Figure 8 shows induced trees this way);
* :func:`plot_trees` -- a predicted tree beside (or, for long sentences, above) the gold tree, each
  node coloured by whether its span is a bracket of the other tree;
* :func:`draw_text_tree` -- the tree as text, via nltk's ``TreePrettyPrinter``
  (``syntaxformer parse --draw``).

Spans are half-open word intervals, brackets as in :func:`syntaxformer.decoding.spans.brackets`.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from nltk import Tree  # noqa: E402
from nltk.tree.prettyprinter import TreePrettyPrinter  # noqa: E402

from syntaxformer.decoding.spans import Span, brackets  # noqa: E402
from syntaxformer.figures.heatmaps import label_fontsize  # noqa: E402

#: Node colours: a bracket the other tree also has, one it lacks, a node that is no bracket.
MATCHED, UNMATCHED, NEUTRAL = "#b7e4c7", "#f9c59a", "#e9ecef"
#: Vertical distance (inches) between two levels of the tree.
LEVEL_INCHES = 0.32
#: Sentences longer than this get their word labels rotated 90 degrees.
LONG_SENTENCE = 15
#: :func:`plot_trees` stacks the two trees when one is wider than this (inches).
MAX_SIDE_BY_SIDE_INCHES = 8.0


def draw_text_tree(tree: Tree, unicodelines: bool = True) -> str:
    """The tree as multi-line text for a terminal (nltk's ``TreePrettyPrinter``).

    Args:
        tree: any ``nltk.Tree`` whose leaves are strings.
        unicodelines: draw edges with box-drawing characters; ``False`` for plain ASCII.

    Returns:
        The drawing, lines joined by newlines, words on the last line in sentence order.

    Note: given a tree with string leaves, nltk's printer (and ``Tree.pretty_print``) numbers the
    words of a node that mixes words and subtrees in pre-order, so ``(S (X (X a b) c) d)`` prints
    as ``d c a b``. Trees from :func:`syntaxformer.decoding.spans.spans_to_tree` are like that, so
    the leaves are replaced here by their sentence positions and the words passed separately.
    """
    indexed = tree.copy(deep=True)
    for index, position in enumerate(indexed.treepositions("leaves")):
        indexed[position] = index
    words = [str(word) for word in tree.leaves()]
    return TreePrettyPrinter(indexed, sentence=words).text(unicodelines=unicodelines)


@dataclass
class _Node:
    x: float
    depth: int
    label: str
    span: Span
    leaf: bool
    children: list[_Node]


def _layout(tree: Tree) -> tuple[_Node, int]:
    """Positions: word ``k`` at x = k; a node at depth d (root 0) in row d, midway between its
    first and last child. Returns the root and the depth of the deepest word.

    Every edge joins a node to a child one row down, and the children of different nodes of a row
    lie in disjoint, ordered x ranges, so no two edges cross; each word is then dropped by a
    vertical line to the bottom row, which no edge crosses either (a subtree stays inside the x
    range of its own words).
    """
    position = 0
    deepest = 0

    def walk(node, depth: int) -> _Node:
        nonlocal position, deepest
        if not isinstance(node, Tree):
            position += 1
            deepest = max(deepest, depth)
            return _Node(position - 1, depth, str(node), (position - 1, position), True, [])
        start = position
        children = [walk(child, depth + 1) for child in node]
        if not children:  # an empty constituent: drawn at the gap where it sits
            return _Node(start - 0.5, depth, str(node.label()), (start, start), False, [])
        return _Node((children[0].x + children[-1].x) / 2, depth, str(node.label()), (start, position), False, children)

    root = walk(tree, 0)
    return root, deepest


def _tree_fontsize(n: int) -> float:
    """Word font size (points) for a tree of ``n`` words: the heatmaps' size + 2, at most 9."""
    return min(9.0, label_fontsize(n) + 2.0)


def _slot_inches(words: list[str], fontsize: float) -> tuple[float, bool]:
    """Horizontal room per word (inches) and whether word labels are rotated 90 degrees
    (0.3 inch per rotated word fits 9 pt)."""
    widest = 0.6 * fontsize / 72 * max((len(w) for w in words), default=1)
    if len(words) <= LONG_SENTENCE and widest + 0.1 <= 1.0:
        return max(0.35, widest + 0.12), False
    return 0.3, True


def plot_tree(
    tree: Tree, ax=None, title: str | None = None, reference: set[Span] | None = None, fontsize: float | None = None
) -> Figure:
    """Draw ``tree`` (an ``nltk.Tree`` with string leaves) as a picture.

    Args:
        tree: the tree; any labels, preterminals allowed.
        ax: an existing matplotlib axes to draw into; default a new figure sized to the tree.
        title: drawn above the tree.
        reference: brackets of another tree: nodes of ``tree`` whose span is a bracket are coloured
            green if the span is in ``reference`` and orange if not; without it all nodes are grey.
        fontsize: of the words (node labels 1 pt smaller); default scaled with the sentence length.

    Returns:
        The figure drawn into.
    """
    words = [str(w) for w in tree.leaves()]
    n = len(words)
    fontsize = _tree_fontsize(n) if fontsize is None else fontsize
    root, bottom = _layout(tree)
    slot, rotate = _slot_inches(words, fontsize)
    word_room = 0.6 * fontsize / 72 * max((len(w) for w in words), default=1) + 0.1 if rotate else 0.3
    if ax is None:
        fig, ax = plt.subplots(
            layout="constrained", figsize=(max(3.0, slot * n + 0.6), LEVEL_INCHES * (bottom + 1) + word_room + 0.6)
        )
    whole = (0, n)

    def colour(node: _Node) -> str:
        if reference is None or node.span[1] - node.span[0] < 2 or node.span == whole:
            return NEUTRAL
        return MATCHED if node.span in reference else UNMATCHED

    def draw(node: _Node) -> None:
        for child in node.children:
            ax.plot([node.x, child.x], [-node.depth, -child.depth], color="#6c757d", linewidth=0.8, zorder=1)
            draw(child)
        if node.leaf:
            if node.depth < bottom:  # drop the word to the bottom row
                ax.plot(
                    [node.x, node.x],
                    [-node.depth, -bottom],
                    color="#adb5bd",
                    linewidth=0.6,
                    linestyle=(0, (2, 2)),
                    zorder=1,
                )
            ax.text(
                node.x,
                -bottom - 0.1,
                node.label,
                rotation=90 if rotate else 0,
                ha="center",
                va="top",
                fontsize=fontsize,
                zorder=3,
            )
        else:
            ax.text(
                node.x,
                -node.depth,
                node.label,
                ha="center",
                va="center",
                fontsize=max(5.0, fontsize - 1),
                zorder=3,
                bbox=dict(boxstyle="round,pad=0.2", facecolor=colour(node), edgecolor="#6c757d", linewidth=0.5),
            )

    draw(root)
    ax.set_xlim(-0.7, n - 0.3)
    ax.set_ylim(-bottom - 0.4, 0.6)
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    return ax.figure


def plot_trees(predicted: Tree, gold: Tree | None = None, title: str | None = None) -> Figure:
    """The predicted tree, and with ``gold`` the gold tree beside it (below it if wide).

    With ``gold``, each tree's nodes are coloured by whether their span is a bracket of the other
    tree (green: shared, orange: only in this tree) and the panel titles count the shared brackets
    (unlabelled brackets as in :func:`syntaxformer.decoding.spans.brackets`).

    Args:
        predicted: the induced tree.
        gold: the gold tree over the same words, or ``None`` for the predicted tree alone.
        title: figure title (for example the model name and sentence number).

    Raises:
        ValueError: if the two trees do not have the same number of words.
    """
    if gold is None:
        fig = plot_tree(predicted, title="predicted")
        if title:
            fig.suptitle(title, fontsize=11)
        return fig
    words = [str(w) for w in predicted.leaves()]
    n = len(words)
    if len(gold.leaves()) != n:
        raise ValueError(f"predicted tree has {n} words, gold tree {len(gold.leaves())}")
    fontsize = _tree_fontsize(n)
    slot, rotate = _slot_inches(words, fontsize)
    depths = [_layout(predicted)[1], _layout(gold)[1]]
    word_room = 0.6 * fontsize / 72 * max(len(w) for w in words) + 0.1 if rotate else 0.3
    panel_w = max(3.0, slot * n + 0.6)
    panel_h = [LEVEL_INCHES * (depth + 1) + word_room + 0.5 for depth in depths]
    if panel_w > MAX_SIDE_BY_SIDE_INCHES:  # stacked, each tree as tall as it needs
        fig, axes = plt.subplots(
            2, 1, layout="constrained", height_ratios=panel_h, figsize=(panel_w, sum(panel_h) + 0.8)
        )
    else:
        fig, axes = plt.subplots(1, 2, layout="constrained", figsize=(2 * panel_w, max(panel_h) + 0.8))
    pred_brackets, gold_brackets = brackets(predicted), brackets(gold)
    shared = len(pred_brackets & gold_brackets)
    plot_tree(
        predicted,
        ax=axes.flat[0],
        reference=gold_brackets,
        fontsize=fontsize,
        title=f"predicted: {shared} of {len(pred_brackets)} brackets are in gold",
    )
    plot_tree(
        gold,
        ax=axes.flat[1],
        reference=pred_brackets,
        fontsize=fontsize,
        title=f"gold: {shared} of {len(gold_brackets)} brackets were found",
    )
    fig.legend(
        handles=[
            Patch(facecolor=MATCHED, edgecolor="#6c757d", label="in both trees"),
            Patch(facecolor=UNMATCHED, edgecolor="#6c757d", label="only in this tree"),
            Patch(facecolor=NEUTRAL, edgecolor="#6c757d", label="not a bracket (root, one word)"),
        ],
        loc="outside lower center",
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
