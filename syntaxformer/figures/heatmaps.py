"""Heatmaps of what a syntax-inducing Transformer computes for one sentence.

* :func:`plot_constituent_priors` -- the constituent prior ``C^l`` of every layer, a grid of
  word-by-word heatmaps (Tree Transformer, Wang et al. EMNLP 2019, Figure 5);
* :func:`plot_link_probabilities` -- the link probabilities ``a^l_k`` of every layer as one
  layer-by-gap heatmap, each cell drawn between the two words it links (paper §3.2, Eq. for the
  hierarchical constraint);
* :func:`plot_attention_heads` -- the attention of every head of one layer (paper Appendix A compares
  these for Tree Transformer and a plain Transformer).

Inputs are single sentences without a batch dimension, as numpy arrays or torch tensors of
probabilities (0-1, never log). Layers and heads are numbered from 0. Sizes and fonts scale with the
sentence length so that word labels do not overlap up to (at least) 40 words: x labels are rotated
90 degrees, the font shrinks from 9 to 5 points, and each panel grows by 0.1 inch per word.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

#: Colour map of every heatmap (perceptually uniform, readable in grey scale).
CMAP = "viridis"
#: Resolution of the PNG files written by :func:`save_figure`.
PNG_DPI = 150


def as_array(values) -> np.ndarray:
    """``values`` (torch tensor, numpy array or nested lists) as a float64 numpy array."""
    if hasattr(values, "detach"):  # a torch tensor, without importing torch here
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


def label_fontsize(n: int) -> float:
    """Font size (points) of word labels for ``n`` words: 9 pt up to 10 words, 5 pt from 30 on."""
    return float(np.clip(9.0 - 0.2 * (n - 10), 5.0, 9.0))


def panel_inches(n: int) -> float:
    """Side (inches) of one ``n`` x ``n`` heatmap panel: 0.1 inch per word, at least 2.2."""
    return max(2.2, 0.1 * n + 0.4)


def save_figure(fig: Figure, stem: str | Path) -> list[Path]:
    """Write ``fig`` as ``stem.png`` and ``stem.svg`` (parent folders created), then close it.

    The files depend on the figure only: the SVG carries no date and its element ids come from a
    fixed salt, so redrawing the same numbers rewrites the same bytes.

    Returns:
        The two paths written, PNG first.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".svg")]
    fig.savefig(paths[0], dpi=PNG_DPI)
    with plt.rc_context({"svg.hashsalt": "syntaxformer"}):
        fig.savefig(paths[1], metadata={"Date": None})
    plt.close(fig)
    return paths


def _check_square(matrices: np.ndarray, words: Sequence[str], what: str) -> None:
    n = len(words)
    if matrices.ndim != 3 or matrices.shape[1:] != (n, n):
        raise ValueError(f"{what} must have shape (panels, {n}, {n}) for {n} words, got {tuple(matrices.shape)}")


def _heatmap_grid(
    matrices: np.ndarray,
    words: Sequence[str],
    panel_titles: Sequence[str],
    suptitle: str,
    colorbar_label: str,
    vmax: float,
    ncols: int,
    xlabel: str,
    ylabel: str,
) -> Figure:
    """One figure of ``len(matrices)`` word-by-word heatmaps sharing one colour scale and bar."""
    n = len(words)
    count = len(matrices)
    # As few rows as ``ncols`` allows, then as few columns as fill those rows (6 panels: 2 x 3).
    nrows = math.ceil(count / max(1, min(ncols, count)))
    ncols = math.ceil(count / nrows)
    side = panel_inches(n)
    fontsize = label_fontsize(n)
    # Room for the rotated / left word labels: about 0.6 em per character.
    label_room = 0.6 * fontsize / 72 * max(len(w) for w in words) + 0.35
    fig, axes = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        layout="constrained",
        figsize=(ncols * (side + label_room) + 1.2, nrows * (side + label_room + 0.3) + 0.6),
    )
    image = None
    for index, ax in enumerate(axes.flat):
        if index >= count:
            ax.set_axis_off()
            continue
        image = ax.imshow(matrices[index], cmap=CMAP, vmin=0.0, vmax=vmax, interpolation="nearest", aspect="equal")
        ax.set_xticks(range(n), labels=words, rotation=90, fontsize=fontsize)
        ax.set_yticks(range(n), labels=words, fontsize=fontsize)
        ax.tick_params(length=2, pad=1)
        ax.set_title(panel_titles[index], fontsize=10)
        if index % ncols == 0:
            ax.set_ylabel(ylabel, fontsize=9)
        if index // ncols == nrows - 1 or index + ncols >= count:
            ax.set_xlabel(xlabel, fontsize=9)
    bar = fig.colorbar(image, ax=axes, shrink=min(1.0, 0.9 / nrows + 0.1), aspect=30, pad=0.02)
    bar.set_label(colorbar_label, fontsize=9)
    fig.suptitle(suptitle, fontsize=12)
    return fig


def plot_constituent_priors(
    priors, words: Sequence[str], model_name: str = "model", layers: Sequence[int] | None = None, ncols: int = 5
) -> Figure:
    """Grid of the constituent prior of every layer, words on both axes (paper Figure 5).

    Args:
        priors: shape ``(L, N, N)``, ``priors[l, i, j] = C^l_ij``, the probability that words ``i``
            and ``j`` are in one constituent at layer ``l`` (Tree Transformer Eq. for C; 0-1).
        words: the ``N`` token labels (special tokens such as ``[CLS]`` included if the model saw
            them).
        model_name: named in the title.
        layers: the layer number of each panel (default ``0 .. L-1``).
        ncols: panels per row.

    Returns:
        The figure (one panel per layer, one shared colour bar on [0, 1]).

    Raises:
        ValueError: if the shape does not match the words.
    """
    priors = as_array(priors)
    _check_square(priors, words, "priors")
    layers = list(range(len(priors))) if layers is None else list(layers)
    return _heatmap_grid(
        priors,
        words,
        [f"layer {l}" for l in layers],
        f"Constituent prior $C^l$ per layer - {model_name}",
        "constituent prior $C_{ij}$ (probability)",
        vmax=1.0,
        ncols=ncols,
        xlabel="word j",
        ylabel="word i",
    )


def plot_attention_heads(
    attention, words: Sequence[str], layer: int, model_name: str = "model", vmax: float | None = None, ncols: int = 4
) -> Figure:
    """Attention of every head of one layer, queries on the y axis, keys on the x axis.

    For Tree Transformer this is ``E = C ⊙ softmax(QKᵀ/√d)`` (rows need not sum to 1); for a plain
    Transformer (``prior="none"``) it is the softmax, so the two can be compared side by side.

    Args:
        attention: shape ``(H, N, N)``, ``attention[h, i, j]`` = attention of query ``i`` on key
            ``j`` in head ``h`` (probabilities, 0-1).
        words: the ``N`` token labels.
        layer: the layer shown (0-based), named in the title.
        model_name: named in the title.
        vmax: top of the shared colour scale; default the largest value in ``attention`` (so a
            diffuse layer stays visible; the colour bar says the scale).
        ncols: panels per row.

    Raises:
        ValueError: if the shape does not match the words.
    """
    attention = as_array(attention)
    _check_square(attention, words, "attention")
    if vmax is None:
        vmax = float(attention.max()) if attention.size and attention.max() > 0 else 1.0
    return _heatmap_grid(
        attention,
        words,
        [f"layer {layer}, head {h}" for h in range(len(attention))],
        f"Attention of every head, layer {layer} - {model_name}",
        "attention weight",
        vmax=vmax,
        ncols=ncols,
        xlabel="key",
        ylabel="query",
    )


def plot_span_marginals(marginals, words: Sequence[str], model_name: str = "model") -> Figure:
    """A PCFG's span marginals ``p((i, j) in tree | words)`` as a word-by-word heatmap: row = the span's
    first word, column = its last word (the upper triangle; the whole sentence top right is 1).

    Args:
        marginals: ``(N+1, N+1)`` half-open spans (:class:`~syntaxformer.structures.SpanMarginals`), 0-1.
        words: the ``N`` word labels.
        model_name: named in the title.
    Raises:
        ValueError: a shape that does not match the words.
    """
    marginals = as_array(marginals)
    n = len(words)
    if marginals.shape != (n + 1, n + 1):
        raise ValueError(f"span marginals must have shape ({n + 1}, {n + 1}) for {n} words, got {marginals.shape}")
    by_last = marginals[:n, 1:]  # [i, j - 1] = span (i, j)
    return _heatmap_grid(
        by_last[None], words, ["span marginals"], f"{model_name}: p(span in tree | sentence)",
        "posterior probability", 1.0, 1, "last word of the span", "first word of the span",
    )  # fmt: skip


def plot_link_probabilities(
    link_probs,
    words: Sequence[str],
    model_name: str = "model",
    layers: Sequence[int] | None = None,
    annotate: bool | None = None,
) -> Figure:
    """Link probabilities of every layer: one row per layer, each cell between the words it links.

    Args:
        link_probs: shape ``(L, N-1)``, ``link_probs[l, k] = a^l_k``, the probability that words
            ``k`` and ``k+1`` are in one constituent at layer ``l`` (0-1).
        words: the ``N`` token labels, drawn on the x axis at integer positions; cell ``k`` spans
            from word ``k`` to word ``k+1``.
        model_name: named in the title.
        layers: the layer number of each row (default ``0 .. L-1``); layer 0 is drawn at the
            bottom, so constituents grow upwards as in the hierarchical constraint.
        annotate: write the value in each cell; default when there are at most 20 gaps.

    Raises:
        ValueError: if the shape does not match the words, or there is no gap (one word).
    """
    link_probs = as_array(link_probs)
    n = len(words)
    if n < 2:
        raise ValueError("a link-probability chart needs at least 2 words")
    if link_probs.ndim != 2 or link_probs.shape[1] != n - 1:
        raise ValueError(f"link_probs must have shape (layers, {n - 1}) for {n} words, got {tuple(link_probs.shape)}")
    count = len(link_probs)
    layers = list(range(count)) if layers is None else list(layers)
    annotate = (n - 1 <= 20) if annotate is None else annotate
    fontsize = min(9.0, label_fontsize(n) + 2)  # 0.32 inch per word leaves room for 7 pt
    label_room = 0.6 * fontsize / 72 * max(len(w) for w in words) + 0.5
    width = max(5.5, 0.32 * n + 2.2)
    height = max(2.0, 0.3 * count + 0.8) + label_room
    fig, ax = plt.subplots(layout="constrained", figsize=(width, height))
    # x edges at word positions: gap k fills [k, k+1]; y edges between layers.
    image = ax.pcolormesh(
        np.arange(n),
        np.arange(count + 1) - 0.5,
        link_probs,
        cmap=CMAP,
        vmin=0.0,
        vmax=1.0,
        edgecolors="white",
        linewidth=0.5,
    )
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(-0.5, count - 0.5)
    ax.set_xticks(range(n), labels=words, rotation=90, fontsize=fontsize)
    ax.set_yticks(range(count), labels=[str(l) for l in layers], fontsize=min(9, fontsize + 2))
    ax.set_ylabel("layer")
    ax.tick_params(length=2, pad=1)
    if annotate:
        for row in range(count):
            for k in range(n - 1):
                value = link_probs[row, k]
                ax.text(
                    k + 0.5,
                    row,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=min(7, fontsize),
                    color="black" if value > 0.6 else "white",
                )
    bar = fig.colorbar(image, ax=ax, aspect=20, pad=0.01)
    bar.set_label("link probability $a^l_k$", fontsize=9)
    ax.set_xlabel("words (each cell lies between the two words it links)", fontsize=9)
    ax.set_title(f"Link probabilities $a^l_k$ per layer\n{model_name}", fontsize=10)
    return fig
