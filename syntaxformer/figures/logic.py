"""Accuracy against the number of logical operators (the logic task's length generalisation).

:func:`plot_accuracy_by_operators` draws one line per model (or per encoder, as the mean over seeds
with the sample standard deviation as error bars): accuracy in percent (0-100) on each ``testN``
against N, with the operator counts seen in training shaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def plot_accuracy_by_operators(
    curves: Mapping[str, Mapping[str, Sequence]],
    max_train_operators: int = 6,
    baseline: Mapping[int, float] | None = None,
    title: str = "",
) -> Figure:
    """Accuracy (%) of each curve against the number of operators.

    Args:
        curves: ``{label: {"operators": [N...], "accuracy": [percent...], "sd": [percent...] (optional)}}``;
            with ``sd`` the points get error bars (mean ± sd over seeds).
        max_train_operators: operator counts up to this one were trained on (shaded).
        baseline: ``{N: percent}`` of the majority class, drawn grey and dashed (None: not drawn).
        title: the figure title (name the data, protocol and seeds).
    Returns:
        The figure (save it with :func:`syntaxformer.figures.save_figure`).
    Raises:
        ValueError: a curve whose lists differ in length.
    """
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.axvspan(0.5, max_train_operators + 0.5, color="0.92", zorder=0, label=f"trained on (≤ {max_train_operators})")
    lowest = 100.0
    for label, curve in curves.items():
        xs, ys = list(curve["operators"]), list(curve["accuracy"])
        sd = curve.get("sd")
        if len(xs) != len(ys) or (sd is not None and len(sd) != len(ys)):
            raise ValueError(f"curve {label!r}: operators, accuracy and sd must have the same length")
        ax.errorbar(xs, ys, yerr=sd, marker="o", markersize=4, capsize=3, label=label)
        lowest = min([lowest] + [y - (sd[i] if sd is not None else 0.0) for i, y in enumerate(ys)])
    if baseline:
        ns = sorted(baseline)
        ax.plot(ns, [baseline[n] for n in ns], color="grey", linestyle="--", linewidth=1, label="majority class (#)")
        lowest = min([lowest] + [baseline[n] for n in ns])
    ax.set_xlabel("logical operators (test12: 12 or more)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_xticks(range(1, 13))
    ax.set_xlim(0.5, 12.5)
    ax.set_ylim(max(0.0, min(lowest, 100.0) - 5.0), 100.5)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


__all__ = ["plot_accuracy_by_operators"]
