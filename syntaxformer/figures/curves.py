"""Learning curves: parsing F1 against training minutes, with the baselines as horizontal lines.

:func:`plot_parse_curve` draws the ``parse_curve`` that ``train --eval-treebank`` records
(:mod:`syntaxformer.evaluation.curve`): one line per decoder, sentence-level F1 (percent, 0-100)
against the training minutes at each point (the first point is step 0, the untrained model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def plot_parse_curve(
    points: Sequence[Mapping], decoders: Sequence[str], baselines: Mapping[str, float], title: str = ""
) -> Figure:
    """Sentence F1 of ``decoders`` against training minutes.

    Args:
        points: the curve's points: ``{"step", "train_minutes", "scores": {decoder: {"sentence_f1"}}}``.
        decoders: which decoders to draw (keys of ``scores``), e.g. ``["algorithm1_m0", "layer0"]``.
        baselines: ``{name: sentence F1}`` drawn as horizontal lines (e.g. right-branching).
        title: the figure title (name the treebank, model and seed).
    Returns:
        The figure (save it with :func:`syntaxformer.figures.save_figure`).
    Raises:
        ValueError: a decoder that no point has.
    """
    fig, ax = plt.subplots(figsize=(7, 4.5))
    minutes = [p["train_minutes"] for p in points]
    for decoder in decoders:
        if any(decoder not in p["scores"] for p in points):
            raise ValueError(f"decoder {decoder!r} is not in every point of the curve")
        ax.plot(minutes, [p["scores"][decoder]["sentence_f1"] for p in points], marker=".", label=decoder)
    styles = iter(["--", ":", "-.", (0, (1, 3))])
    for name, value in baselines.items():
        ax.axhline(value, color="grey", linestyle=next(styles, "--"), linewidth=1, label=f"{name} ({value:.2f})")
    ax.set_xlabel("training minutes")
    ax.set_ylabel("sentence-level F1 (%)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


__all__ = ["plot_parse_curve"]
