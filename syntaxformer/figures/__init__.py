"""Figures: constituent-prior heatmaps, link probabilities, syntactic distances, attention heads and induced trees.

Every figure function takes plain arrays (``numpy`` or ``torch``, no batch dimension) or
``nltk.Tree`` objects and returns a :class:`matplotlib.figure.Figure`; :func:`save_figure` writes it
as PNG and SVG. Nothing here loads a model: :mod:`syntaxformer.workflows.show` does that and calls these.

matplotlib's non-interactive ``Agg`` backend is selected here, before pyplot is imported, so the
figures work without a display.

Conventions (ARCHITECTURE.md): layers and heads are numbered from 0; link probability ``a[k]`` is
the gap between words ``k`` and ``k+1`` and is drawn between those two words; all values shown are
probabilities in [0, 1], never log.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from syntaxformer.figures.curves import plot_parse_curve  # noqa: E402
from syntaxformer.figures.distances import plot_syntactic_distances  # noqa: E402
from syntaxformer.figures.heatmaps import (  # noqa: E402
    plot_attention_heads,
    plot_constituent_priors,
    plot_link_probabilities,
    plot_span_marginals,
    save_figure,
)
from syntaxformer.figures.html import write_index  # noqa: E402
from syntaxformer.figures.trees import (  # noqa: E402
    draw_text_tree,
    plot_tree,
    plot_trees,
)

__all__ = [
    "draw_text_tree",
    "plot_attention_heads",
    "plot_constituent_priors",
    "plot_link_probabilities",
    "plot_parse_curve",
    "plot_span_marginals",
    "plot_syntactic_distances",
    "plot_tree",
    "plot_trees",
    "save_figure",
    "write_index",
]
