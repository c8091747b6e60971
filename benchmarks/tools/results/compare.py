"""``docs/results/compare.md``: the masked-LM comparison of the Tree Transformer and plain Transformers
(``compare``, the models labelled by :data:`COMPARE_LABELS`).

Data: ``records/compare/compare-ptb-lm-small-seed0.json``.
"""

from __future__ import annotations

from benchmarks.tools.results.core import load, markdown, table

COMPARE_LABELS = {
    "tree-transformer": "Tree Transformer",
    "transformer": "Transformer",
    "transformer-L8": "Transformer, ≥ the Tree Transformer's parameters",
}


@table("compare")
def compare() -> str:
    report = load("records/compare/compare-ptb-lm-small-seed0.json")
    rows = [
        [
            COMPARE_LABELS.get(r["name"], r["name"]),
            r["prior"],
            r["layers"],
            f"{r['parameters']:,}",
            f"{r['steps']:,}",
            f"{r['train_minutes']:.1f}",
            f"{r['perplexity']:.1f}",
        ]
        for r in report["runs"]
    ]
    return markdown(
        ["model", "prior", "layers", "parameters", "steps", "train min", "test perplexity"], rows, "llrrrrr"
    )
