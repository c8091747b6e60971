"""Syntactic distances of one sentence as bar charts, each bar between the two words of its gap.

:func:`plot_syntactic_distances` draws one panel per layer (ON-LSTM: ``1 - mean(master forget gate)``
of every layer, Shen et al. 2019 §5.2; StructFormer: its one row of distances), layer 0 at the bottom,
the row the decoder splits highlighted. The tree decoder splits a span at its largest distance first
(DESIGN.md §3.4), so the tallest bar of a span is where the span is cut.

Conventions (ARCHITECTURE.md): distance ``d[k]`` belongs to the gap between words ``k`` and ``k+1``
and is drawn between them; layers are numbered from 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from syntaxformer.figures.heatmaps import as_array, label_fontsize  # noqa: E402

#: Bar colours: the decoder's row, the other rows.
PARSED_COLOUR, OTHER_COLOUR = "#d95f02", "#7570b3"


def plot_syntactic_distances(
    distances,
    words: Sequence[str],
    model_name: str = "model",
    parsed: int | None = None,
    layers: Sequence[int] | None = None,
    annotate: bool | None = None,
) -> Figure:
    """Syntactic distances per layer: one bar chart per row, each bar between the words of its gap.

    Args:
        distances: shape ``(L, N-1)`` (or ``(N-1,)`` for one row): ``distances[l, k]`` is the
            distance of the gap between words ``k`` and ``k+1`` in layer ``l`` (larger = split first).
        words: the ``N`` word labels, on the x axis at integer positions.
        model_name: named in the title.
        parsed: the row the tree decoder splits (highlighted and named), or None.
        layers: the layer number (or a label) of each row (default ``0 .. L-1``); row 0 is drawn at
            the bottom.
        annotate: write each value above its bar; default when there are at most 20 gaps.

    Raises:
        ValueError: a shape that does not match the words, fewer than 2 words, or ``parsed`` out of range.
    """
    distances = as_array(distances)
    distances = distances[None, :] if distances.ndim == 1 else distances
    n = len(words)
    if n < 2:
        raise ValueError("a distance chart needs at least 2 words")
    if distances.ndim != 2 or distances.shape[1] != n - 1:
        raise ValueError(f"distances must have shape (layers, {n - 1}) for {n} words, got {tuple(distances.shape)}")
    count = len(distances)
    if parsed is not None and not 0 <= parsed < count:
        raise ValueError(f"parsed row {parsed} out of range for {count} rows")
    layers = list(range(count)) if layers is None else list(layers)
    annotate = (n - 1 <= 20) if annotate is None else annotate
    fontsize = min(9.0, label_fontsize(n) + 2)
    top = max(float(distances.max()), 1e-6) * (1.18 if annotate else 1.05)
    bottom = min(float(distances.min()), 0.0)
    fig, axes = plt.subplots(
        count,
        1,
        layout="constrained",
        sharex=True,
        squeeze=False,
        figsize=(max(5.5, 0.32 * n + 1.5), 1.3 * count + 1.2),
    )
    for row in range(count):
        ax = axes[count - 1 - row, 0]  # layer 0 at the bottom
        colour = PARSED_COLOUR if row == parsed else OTHER_COLOUR
        ax.bar(np.arange(n - 1) + 0.5, distances[row], width=0.8, color=colour)
        if annotate:
            for k, value in enumerate(distances[row]):
                ax.text(k + 0.5, value, f"{value:.2f}", ha="center", va="bottom", fontsize=min(7, fontsize))
        ax.set_ylim(bottom, top)
        ax.set_xlim(-0.5, n - 0.5)
        name = (layers[row] if isinstance(layers[row], str) else f"layer {layers[row]}") + (
            " (parsed)" if row == parsed else ""
        )
        ax.set_ylabel(name, fontsize=8)
        ax.tick_params(labelsize=7, length=2, pad=1)
        ax.grid(axis="y", linewidth=0.3, alpha=0.5)
    axes[-1, 0].set_xticks(range(n), labels=words, rotation=90, fontsize=fontsize)
    axes[-1, 0].set_xlabel("words (each bar lies between the two words of its gap)", fontsize=9)
    fig.suptitle(f"Syntactic distances per layer (split at the largest first)\n{model_name}", fontsize=10)
    return fig


__all__ = ["plot_syntactic_distances", "PARSED_COLOUR", "OTHER_COLOUR"]
