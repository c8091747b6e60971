"""``docs/results/heads.md``: the attention-head tables: ``syntaxformer prune`` on the shipped parser
(``heads-prune-shipped``), hard-concrete gates per λ (``heads-gates``) and the head study of three
encoders side by side (``heads-study``).

Data: ``records/heads/prune-shipped-parser.json``, ``records/heads/gates-tree-transformer-ptb.json`` and
``records/heads/head-study.json``.
"""

from __future__ import annotations

from benchmarks.tools.results.core import load, markdown, table

PRUNE_SHIPPED = "records/heads/prune-shipped-parser.json"


def _point(curve: list[dict], removed: int) -> dict:
    return next(p for p in curve if p["n_removed"] == removed)


def _ppl_f1(point: dict) -> str:
    """``perplexity / F1`` of a pruning point; a random point (with ``*_sd``): mean ± sd over its seeds."""

    def cell(key: str, digits: int) -> str:
        sd = point.get(f"{key}_sd")
        return f"{point[key]:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd and point["n_removed"] else "")

    return cell("perplexity", 1) + (f" / {cell('sentence_f1', 2)}" if "sentence_f1" in point else "")


@table("heads-prune-shipped")
def heads_prune_shipped() -> str:
    """``syntaxformer prune`` on the shipped parser: perplexity / sentence F1 per order and heads removed."""
    record = load(PRUNE_SHIPPED)
    once, recomputed = record["once"]["orders"], record["recomputed"]["orders"]
    n_heads = record["once"]["n_heads"]
    rows = []
    for point in once["importance"]["points"]:
        n = point["n_removed"]
        rows.append(
            [
                f"{n} ({100 * n / n_heads:.0f}%)",
                _ppl_f1(point),
                _ppl_f1(_point(recomputed["importance"]["points"], n)),
                _ppl_f1(_point(once["confidence"]["points"], n)),
                _ppl_f1(_point(once["random"]["points"], n)),
            ]
        )
    seeds = len(once["random"]["seeds"])
    return markdown(
        ["heads removed", "importance: ppl / F1", "importance, recomputed", "confidence", f"random ({seeds} seeds)"],
        rows,
        "lrrrr",
    )


@table("heads-gates")
def heads_gates() -> str:
    """Hard-concrete gates on the shipped parser, per λ."""
    report = load("records/heads/gates-tree-transformer-ptb.json")
    src = report["source"]
    rows = [
        [
            "source, not fine-tuned",
            f"{src['n_heads']}/{src['n_heads']}",
            f"{src['perplexity']:.1f}",
            f"{src['sentence_f1']:.2f}",
            f"{src['parameters']:,}",
        ]
    ]
    for run in report["runs"]:
        silenced = f" (layer {', '.join(run['silenced'])} silenced)" if run["silenced"] else ""
        rows.append(
            [
                f"{run['gate_l0']:g}" + (" (control)" if run["gate_l0"] == 0 else ""),
                f"{run['n_kept']}/{run['n_heads']} {run['kept_per_layer']}{silenced}",
                f"{run['perplexity']:.1f}",
                f"{run['sentence_f1']:.2f}",
                f"{run['parameters_after_pruning']:,}",
            ]
        )
    return markdown(["λ", "heads kept (per layer)", "perplexity", "sentence F1", "parameters"], rows, "llrrr")


def _gate(model: dict, lam: float) -> dict:
    return next(g for g in model["gates"] if g["gate_l0"] == lam)


def _f1(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _study_cells(m: dict) -> list[str]:
    """One model's column of the head study (``records/heads/head-study.json``'s ``models`` entry)."""
    curves, roles, importance = m["curves"], m["roles"], m["importance"]
    half = importance["n_heads"] // 2
    pruned = {order: _point(curves[order], half) for order in ("importance", "confidence", "random")}
    gate0, gate1, gate3 = _gate(m, 0.0), _gate(m, 0.1), _gate(m, 0.3)
    return [
        f"{curves['importance'][0]['perplexity']:.1f}",
        _f1(curves["importance"][0].get("sentence_f1")),
        f"{importance['top_quarter_share']:.1f}% / {importance['gini']:.2f}",
        str(roles["positional"]),
        str(roles["syntactic_any"]),
        f"{roles['ptb_attends_to_head_best']:.1f}",
        f"{pruned['importance']['perplexity']:.0f} / {pruned['confidence']['perplexity']:.0f} / "
        f"{pruned['random']['perplexity']:.0f} ± {pruned['random']['perplexity_sd']:.0f}",
        _f1(pruned["importance"].get("sentence_f1")),
        f"{gate1['n_kept']}, {gate1['perplexity']:.1f} ({gate0['perplexity']:.1f})",
        f"{gate3['n_kept']}, {gate3['perplexity']:.1f}, {_f1(gate3.get('sentence_f1'))}",
    ]


@table("heads-study")
def heads_study() -> str:
    """The head study (seed 0): Tree Transformer, plain Transformer, StructFormer side by side."""
    models = load("records/heads/head-study.json")["models"]
    order = [models[k] for k in ("tree-transformer", "transformer", "structformer")]
    baseline = order[0]["roles"]["ptb_attends_to_head_baseline"]
    labels = [
        "held-out perplexity (one mask per input)",
        "sentence F1, ptb-sample:dev",
        "importance: share of the top quarter of heads / Gini",
        "positional heads (≥ 90% on −1 or +1)",
        "syntactic heads (UD-EWT dev, ≥ 10 points over the relation's positional baseline)",
        f'best head "attends to its head", ptb-sample:dev (baseline {baseline:.1f})',
        "perplexity with half the heads pruned: importance / confidence / random (3 seeds)",
        "F1 with half the heads pruned, importance order",
        "gates λ = 0.1: heads kept, perplexity (λ = 0 control)",
        "gates λ = 0.3: heads kept, perplexity, F1",
    ]
    columns = [_study_cells(m) for m in order]
    rows = [[label, *(column[i] for column in columns)] for i, label in enumerate(labels)]
    return markdown(["seed 0, ptb-sample", *(m["label"] for m in order)], rows, "lrrr")
