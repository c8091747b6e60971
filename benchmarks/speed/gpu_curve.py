"""The loss curves of the eager and the fast training step on a GPU, plotted from their record:

    python -m benchmarks.speed.gpu_curve        # records/benchmarks/gpu-loss-curve.json -> docs/results/speed/gpu-loss-curve.png

The record (written from ``benchmarks/speed/gpu_session.sh``'s ``curves.json``) holds each run's
``training.json`` with ``valid_history`` (``[step, validation loss]``) and, where TensorBoard was
there, ``train_loss_curve`` (``[step, training loss]`` every ``log_every`` steps). The figure draws
both per run against the step: the same curve within seed noise is what the fast step must give.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RECORD = Path("records/benchmarks/gpu-loss-curve.json")
#: the figure, where the speed page shows it
FIGURE = Path("docs/results/speed/gpu-loss-curve.png")


def plot(record: dict, out: Path) -> None:
    """Training loss (thin) and validation loss (markers) against the step, one colour per run."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for (name, run), colour in zip(sorted(record["runs"].items()), ("tab:orange", "tab:blue")):
        rate = f"{run['tokens_per_second'] / 1000:.0f}k tokens/s"
        if run.get("train_loss_curve"):
            steps, losses = zip(*run["train_loss_curve"])
            ax.plot(steps, losses, color=colour, linewidth=0.8, alpha=0.6, label=f"{name}: training ({rate})")
        steps, losses = zip(*run["valid_history"])
        ax.plot(steps, losses, "o-", color=colour, markersize=3, label=f"{name}: validation")
    ax.set_xlabel("step")
    ax.set_ylabel("masked-LM loss (nats)")
    ax.set_ylim(top=9)
    ax.set_title(f"Tree Transformer paper preset, ptb-sample, seed 0 — {record['device']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120, metadata={"Software": None})
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", type=Path, default=RECORD)
    p.add_argument("--out", type=Path, default=None, help=f"the figure (default: {FIGURE})")
    args = p.parse_args(argv)
    plot(json.loads(args.record.read_text()), args.out or FIGURE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
