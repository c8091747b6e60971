"""``syntaxformer prune``: pruning curves of attention heads (DESIGN.md §3.5, Michel et al. 2019).

Removes heads a fraction at a time (importance, confidence or random order; the random order over
``--seeds`` seeds as the control) and measures masked-LM perplexity (one mask per input) and, for
models that induce trees, sentence F1 on ptb-sample:dev. Writes ``OUT/prune.json`` and
``OUT/prune.{png,svg}``, prints a table. The work is :func:`syntaxformer.workflows.prune.run_prune`.
"""

from __future__ import annotations

import json

from syntaxformer.cli.arguments import add_decoder_arguments, add_device_argument, decoder_options


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "prune",
        help="pruning curves: perplexity and F1 as attention heads are removed",
        description="Remove attention heads a fraction at a time, least important (Michel et al. 2019) or "
        "least confident (Voita et al. 2019) first, or at random (the control), keeping one "
        "head per layer; measure masked-LM perplexity (one [MASK] per input) on held-out text "
        "and sentence F1 on ptb-sample:dev (--treebank). Rules: DESIGN.md §3.5, syntaxformer.analysis.pruning.",
    )
    p.add_argument(
        "--model", default=None, help="model folder (default: the pretrained Tree Transformer shipped in the package)"
    )
    p.add_argument("--out", required=True, help="output folder (prune.json, prune.png, prune.svg)")
    p.add_argument(
        "--order",
        nargs="+",
        default=["importance"],
        metavar="ORDER",
        help="importance, confidence and/or random; random is added as the control unless --seeds 0",
    )
    p.add_argument(
        "--step",
        type=float,
        default=0.1,
        help="fraction of the heads removed per step, in (0, 1); the curve goes up to 0.9",
    )
    p.add_argument(
        "--recompute",
        action="store_true",
        help="recompute importance / confidence on the pruned model before every step",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the importance masks; random seeds start here")
    p.add_argument("--seeds", type=int, default=3, help="seeds of the random control (0: no control)")
    p.add_argument(
        "--save-at",
        type=float,
        default=None,
        metavar="FRACTION",
        help="save the first order's pruned model at this fraction of the curve into OUT/pruned-F/ "
        "(default: none saved)",
    )
    p.add_argument(
        "--corpus",
        dest="text",
        default=None,
        help="text for perplexity and scoring: 'ptb-sample:dev', 'ptb-sample:test' or text files; "
        "default: the held-out part of the model's training data, else ptb-sample:dev",
    )
    p.add_argument(
        "--max-sentences", type=int, default=None, help="use at most the first N sentences of the text (default: all)"
    )
    p.add_argument(
        "--treebank",
        default="ptb-sample:dev",
        help="gold trees of the sentence F1 at each point (ptb-sample, ptb-sample:dev, ptb-sample:test or files; "
        "default ptb-sample:dev; 'none': no F1)",
    )
    p.add_argument("--batch-size", type=int, default=32, help="sentences per importance / parsing batch")
    p.add_argument("--batch-tokens", type=int, default=4096, help="tokens per perplexity forward pass")
    p.add_argument(
        "--via",
        choices=["prune", "mask"],
        default="prune",
        help="remove heads for the perplexity by pruning a copy (default) or by head_mask (equal)",
    )
    add_device_argument(p)
    p.add_argument("--json", action="store_true", help="print prune.json's curves as JSON instead of the table")
    add_decoder_arguments(p)
    add_translation_arguments(p)
    p.set_defaults(func=run)


def add_translation_arguments(p) -> None:
    """The options of a translation model's curves and gates (the model's ``config.json`` decides)."""
    from syntaxformer.cli.heads import add_translation_data_arguments

    add_translation_data_arguments(p)
    group = p.add_argument_group("translation models: curves and hard-concrete gates")
    group.add_argument(
        "--curves",
        nargs="+",
        default=["all", "encoder"],
        metavar="SET",
        help="sets of heads pruned, each alone: all (the three kinds together), encoder, decoder_self, cross; "
        "'none': no curve (default: all encoder)",
    )
    group.add_argument("--beam", type=int, default=1, help="beam of the BLEU translations (default 1: greedy)")
    group.add_argument(
        "--gates",
        nargs="+",
        type=float,
        default=[],
        metavar="LAMBDA",
        help="fine-tune with hard-concrete gates on the encoder heads at each L0 weight (Voita et al. 2019) and "
        "write OUT/gates.json (default: none)",
    )
    group.add_argument("--gate-steps", type=int, default=200, help="fine-tuning steps per lambda")
    group.add_argument("--gate-lr", type=float, default=0.05, help="Adam learning rate of the gates' log alpha")
    group.add_argument("--gate-model-lr", type=float, default=1e-4, help="Adam learning rate of the model's weights")
    group.add_argument("--gate-max-tokens", type=int, default=2048, help="padded tokens per fine-tuning batch")
    group.add_argument(
        "--train-source", default=None, help="fine-tuning source sentences (default: the model's training.json)"
    )
    group.add_argument(
        "--train-target",
        default=None,
        help="fine-tuning target sentences, aligned (default: the model's training.json)",
    )


def format_translation_prune(report: dict) -> str:
    """Per set of heads, one row per fraction: heads removed, BLEU per order (random: mean±sd); then the
    share removable within the tolerance; then the gates."""
    lines = [
        f"model {report['model']} ({report['variant']}); BLEU-4 tokenised, {report['search']}, on "
        f"{report['data']['pairs']} pairs of {report['data']['source']}; full model {report['full_bleu']:.2f}; "
        f"random seeds {report['random_seeds']}"
    ]
    for name, curve in report["curves"].items():
        orders = curve["orders"]
        lines.append(f"{name} ({curve['n_heads']} heads; at most {curve['max_removable']} removable)")
        lines.append(f"{'removed':>9} | " + " | ".join(f"{o + ' BLEU':>13}" for o in orders))
        first = next(iter(orders.values()))["points"]
        for i, some in enumerate(first):
            cells = [_cell(c["points"][i], "bleu", ".2f") for c in orders.values()]
            lines.append(
                f"{some['n_removed']:>3} {100 * some['fraction_removed']:>4.0f}% | "
                + " | ".join(f"{c:>13}" for c in cells)
            )
        shares = ", ".join(f"{o} {100 * c['removable']['fraction_removed']:.0f}%" for o, c in orders.items())
        lines.append(f"  removable within {report['tolerance']} BLEU: {shares}")
    for row in (report.get("gates") or {}).get("kept_and_bleu", []):
        same = row.get("importance_order")
        beside = f"; importance order without {same['n_removed']}: BLEU {same['bleu']:.2f}" if same else ""
        lines.append(
            f"gates lambda {row['gate_l0']:g}: {row['n_kept']} encoder heads kept, BLEU {row['bleu']:.2f}{beside}"
        )
    return "\n".join(lines)


def run_translation(args) -> int:
    from syntaxformer.cli.heads import check_translation_data
    from syntaxformer.workflows.translation_heads import BLEU_SENTENCES, run_translation_prune

    check_translation_data(args)
    report = run_translation_prune(
        args.out,
        args.model,
        args.source,
        args.target,
        orders=args.order,
        step=args.step,
        seed=args.seed,
        seeds=args.seeds,
        curves=[] if args.curves == ["none"] else args.curves,
        max_sentences=args.max_sentences or BLEU_SENTENCES,
        beam=args.beam,
        importance_batch_size=args.batch_size,
        device=args.device,
        gates=args.gates,
        gate_options=dict(
            train_source=args.train_source,
            train_target=args.train_target,
            steps=args.gate_steps,
            lr=args.gate_model_lr,
            gate_lr=args.gate_lr,
            max_tokens=args.gate_max_tokens,
        ),
        tree_cache=args.tree_cache,
    )
    if args.json:
        keep = ("model", "variant", "seed", "random_seeds", "full_bleu", "data", "files")
        summary = {k: report[k] for k in keep}
        summary["curves"] = {
            name: {
                o: dict(removable=c["removable"], bleu=[p["bleu"] for p in c["points"]])
                for o, c in curve["orders"].items()
            }
            for name, curve in report["curves"].items()
        }
        summary["gates"] = report.get("gates")
        print(json.dumps(summary))
    else:
        print(format_translation_prune(report))
        print("wrote " + ", ".join(report["files"] + (report.get("gates") or {}).get("files", [])))
    return 0


def _cell(point: dict, name: str, spec: str) -> str:
    if name not in point:
        return "-"
    value = format(point[name], spec)
    return f"{value}±{format(point[name + '_sd'], spec)}" if f"{name}_sd" in point else value


def format_prune_report(report: dict) -> str:
    """One row per fraction: heads removed, then per order perplexity and sentence F1 (random: mean±sd),
    then the first order's heads removed per layer."""
    orders = report["orders"]
    with_f1 = report["data"]["treebank"] is not None
    head = f"{'removed':>9}"
    for name in orders:
        head += f" | {name + ' ppl':>17}" + (f" {'F1':>11}" if with_f1 else "")
    first = next(iter(orders))
    lines = [head + f" | {first} per layer"]
    for i, fraction in enumerate(report["fractions"]):
        some = orders[first]["points"][i]
        row = f"{some['n_removed']:>3} {100 * some['fraction_removed']:>4.0f}%"
        for curve in orders.values():
            point = curve["points"][i]
            row += f" | {_cell(point, 'perplexity', '.2f'):>17}" + (
                f" {_cell(point, 'sentence_f1', '.2f'):>11}" if with_f1 else ""
            )
        per_layer = some.get("removed_per_layer") or [round(x, 1) for x in some["removed_per_layer_mean"]]
        lines.append(row + f" | {per_layer}")
    return "\n".join(lines)


def summary_lines(report: dict) -> list[str]:
    """What was measured: model, data, protocols, seeds."""
    data = report["data"]
    text, importance = data["text"], data["importance"]
    lines = [
        f"model {report['model']} ({report['model_type']}, prior {report['prior']}, {report['layers']} layers "
        f"x {report['heads']} heads = {report['n_heads']}; at most {report['max_removable']} removable); "
        f"seed {report['seed']}, random seeds {report['random_seeds']}",
        f"perplexity: {report['protocol']['perplexity']}",
        f"  on {text['source']}: {text['n_sentences']} sentences, {text['n_words']} words "
        f"({text['n_unknown']} unknown, {text['n_skipped_too_long']} sentences skipped as too long)",
        f"importance: {importance['n_masked_tokens']} masked tokens (rate {importance['mask_rate']}, "
        f"seed {importance['seed']}), {'recomputed every step' if report['recompute'] else 'scored once'}",
    ]
    if data["treebank"]:
        lines.append(
            f"F1: sentence-level, {data['treebank']} ({data['n_treebank_sentences']} sentences), "
            f"decoder {report['decoder']}"
        )
    if report["fractions_left_out"]:
        lines.append(f"left out (more heads than one per layer allows): {report['fractions_left_out']}")
    return lines


def run(args) -> int:
    from syntaxformer.tasks.translator import is_translation_model
    from syntaxformer.workflows.prune import run_prune

    if is_translation_model(args.model):
        return run_translation(args)

    report = run_prune(
        args.out,
        model=args.model,
        orders=args.order,
        step=args.step,
        recompute=args.recompute,
        seed=args.seed,
        seeds=args.seeds,
        save_at=args.save_at,
        text=args.text,
        options=decoder_options(args),
        device=args.device,
        max_sentences=args.max_sentences,
        batch_size=args.batch_size,
        batch_tokens=args.batch_tokens,
        via=args.via,
        treebank=None if args.treebank == "none" else args.treebank,
    )
    if args.json:
        keep = ("model", "model_type", "n_heads", "seed", "random_seeds", "fractions", "data", "saved", "files")
        summary = {k: report[k] for k in keep}
        summary["orders"] = {
            name: [{k: v for k, v in p.items() if k not in ("scores", "removed")} for p in curve["points"]]
            for name, curve in report["orders"].items()
        }
        print(json.dumps(summary))
    else:
        print("\n".join(summary_lines(report)))
        print(format_prune_report(report))
        if report["saved"]:
            print(
                f"saved the {report['saved']['order']} order's model at {report['saved']['fraction']:g} "
                f"({report['saved']['n_removed']} heads removed) to {report['saved']['path']}"
            )
        print("wrote " + ", ".join(report["files"]))
    return 0
