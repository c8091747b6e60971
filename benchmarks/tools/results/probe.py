"""``docs/results/probe.md``: logistic-regression probes of the shipped parser's layers on ptb-sample
(``probe-shipped``) and on UD English-EWT dev (``probe-shipped-ud-ewt``), beside the majority class, a bag
of words and the untrained model.

Data: ``records/probe/shipped-parser-seed0.json`` and ``records/probe/shipped-parser-ud-ewt-dev-seed0.json``.
"""

from __future__ import annotations

from benchmarks.tools.results.core import load, markdown, table


def _probe_table(path: str) -> str:
    report = load(path)
    rows = []
    for task, t in report["tasks"].items():
        best = t["best_layer"]
        layers = " / ".join(f"{layer['logreg']['test']:.1f}" for layer in t["layers"]["trained"])
        rows.append(
            [
                task,
                f"{t['majority']['test']:.1f}",
                f"{t['bag_of_words']['logreg']['test']:.1f}",
                f"{best['untrained']['logreg']['test']:.1f} ({best['untrained']['logreg']['layer']})",
                f"{best['trained']['logreg']['test']:.1f} ({best['trained']['logreg']['layer']})",
                layers,
                f"{t['n_sentences']['test']:,}",
            ]
        )
    n_layers = len(next(iter(report["tasks"].values()))["layers"]["trained"])
    return markdown(
        [
            "task",
            "majority",
            "bag of words",
            "untrained (best layer)",
            "trained (best layer)",
            f"trained, layers 0–{n_layers - 1}",
            "test sentences",
        ],
        rows,
        "lrrrrrr",
    )


@table("probe-shipped")
def probe_shipped() -> str:
    return _probe_table("records/probe/shipped-parser-seed0.json")


@table("probe-shipped-ud-ewt")
def probe_shipped_ud_ewt() -> str:
    return _probe_table("records/probe/shipped-parser-ud-ewt-dev-seed0.json")
