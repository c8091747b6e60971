"""Layers × heads heatmaps: one value per attention head (importance, confidence, roles).

:func:`plot_head_map` draws an ``(L, H)`` grid, layer 0 at the top, head 0 on the left, each cell
annotated with its value (or a given label); NaN cells (pruned heads) are grey and marked
"pruned". Used by ``syntaxformer heads`` (:mod:`syntaxformer.analysis.heads`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import Normalize, TwoSlopeNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from syntaxformer.figures.heatmaps import CMAP, as_array  # noqa: E402

#: Colour map of signed values drawn around ``center`` (e.g. gains over a baseline).
DIVERGING_CMAP = "RdBu_r"
#: Colour of pruned (NaN) cells.
MISSING_COLOUR = "#d9d9d9"


def _norm(values: np.ndarray, vmin, vmax, center):
    finite = values[np.isfinite(values)]
    lo = float(finite.min()) if vmin is None and finite.size else (0.0 if vmin is None else vmin)
    hi = float(finite.max()) if vmax is None and finite.size else (1.0 if vmax is None else vmax)
    if center is None:
        return Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1.0)
    half = max(abs(lo - center), abs(hi - center), 1e-9)
    return TwoSlopeNorm(vcenter=center, vmin=center - half, vmax=center + half)


def plot_head_map(
    values,
    title: str,
    colorbar_label: str = "",
    vmin: float | None = None,
    vmax: float | None = None,
    center: float | None = None,
    labels: Sequence[Sequence[str | None]] | None = None,
    digits: int = 2,
) -> Figure:
    """Heatmap of one value per head.

    Args:
        values: ``(L, H)`` numbers (NaN = pruned head, drawn grey).
        title: figure title. colorbar_label: the colour bar's label (units).
        vmin, vmax: colour limits (default: the finite data's range).
        center: draw with a diverging colour map centred here (e.g. 0 for gains); limits symmetric.
        labels: ``(L, H)`` cell texts instead of the values (None entries: the value).
        digits: decimals of the printed values.

    Returns:
        The figure (save it with :func:`syntaxformer.figures.save_figure`).
    """
    grid = as_array(values)
    if grid.ndim != 2:
        raise ValueError(f"values must have shape (layers, heads), got {tuple(grid.shape)}")
    layers, heads = grid.shape
    norm = _norm(grid, vmin, vmax, center)
    cmap = plt.get_cmap(DIVERGING_CMAP if center is not None else CMAP).with_extremes(bad=MISSING_COLOUR)
    fig, ax = plt.subplots(figsize=(max(3.5, 0.75 * heads + 2.2), max(2.5, 0.55 * layers + 1.4)), layout="constrained")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    fontsize = 8 if heads <= 12 else 6
    for layer in range(layers):
        for head in range(heads):
            value = grid[layer, head]
            label = labels[layer][head] if labels is not None else None
            if not math.isfinite(value):
                text, colour = "pruned", "#555555"
            else:
                text = label if label is not None else f"{value:.{digits}f}"
                r, g, b, _ = cmap(norm(value))
                colour = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            ax.text(head, layer, text, ha="center", va="center", fontsize=fontsize, color=colour)
    ax.set_xticks(range(heads), labels=[str(h) for h in range(heads)])
    ax.set_yticks(range(layers), labels=[str(layer) for layer in range(layers)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(image, ax=ax, shrink=0.9)
    bar.set_label(colorbar_label, fontsize=9)
    return fig


__all__ = ["plot_head_map"]
