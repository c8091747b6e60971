"""Probing accuracy per layer (``syntaxformer probe``): one panel per task, the trained and the
untrained encoder's test accuracy (percent, 0-100) against the layer, with the majority class and
the bag-of-words probe as horizontal lines."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def plot_probe(report: Mapping, classifier: str | None = None) -> Figure:
    """Test accuracy against layer for every task of a probe report (:func:`~syntaxformer.workflows.probe.run_probe`).

    Args:
        report: the probe report (``tasks`` -> ``layers`` -> ``trained``/``untrained`` per layer).
        classifier: which probe to draw (default the report's first, e.g. ``logreg``).

    Returns:
        The figure (save it with :func:`syntaxformer.figures.save_figure`).
    """
    kind = classifier or report["classifiers"][0]
    tasks = report["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.6 * len(tasks), 3.4), squeeze=False)
    for ax, (name, task) in zip(axes[0], tasks.items()):
        for encoder, style in (("trained", "-"), ("untrained", "--")):
            rows = task["layers"][encoder]
            ax.plot(range(len(rows)), [r[kind]["test"] for r in rows], style, marker=".", label=encoder)
        ax.axhline(task["bag_of_words"][kind]["test"], color="grey", linestyle=":", label="bag of words")
        ax.axhline(task["majority"]["test"], color="black", linestyle=(0, (1, 3)), label="majority")
        ax.set_title(name)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"test accuracy (%), {kind}")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(f"{report['model_type']} probed on {report['data']['treebank']} (seed {report['seed']})", fontsize=10)
    fig.tight_layout()
    return fig
