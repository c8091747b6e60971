"""``syntaxformer heads``: importance and roles of every attention head (DESIGN.md §3.5).

Per layer × head: importance (Michel et al. 2019, raw and ℓ2-normalised per layer), confidence,
positional and rare-word shares, syntactic accuracy per relation and direction against gold trees
beside the relation's baseline (Voita et al. 2019). Writes ``OUT/heads.json``, heatmaps
(``OUT/*.png``, ``*.svg``) and ``OUT/index.html``, and prints a table. The work is
:func:`syntaxformer.analysis.heads.analyse_heads`; this module reads the arguments and prints.
"""

from __future__ import annotations

import json

from syntaxformer.cli.arguments import add_device_argument


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "heads",
        help="importance and roles (positional, syntactic, rare-word) of every attention head",
        description="Score every attention head of a trained model: importance (Michel et al. 2019: "
        "|dL/dxi| of the masked-LM loss on held-out text), confidence, positional, "
        "syntactic and rare-word roles (Voita et al. 2019). Definitions: DESIGN.md §3.5 "
        "and syntaxformer.analysis.heads.",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model folder written by `syntaxformer train` or `syntaxformer translation train` (default: "
        "the pretrained Tree Transformer shipped in the package)",
    )
    p.add_argument("--out", required=True, help="output folder (heads.json, heatmaps, index.html)")
    p.add_argument(
        "--corpus",
        dest="text",
        default=None,
        help="text for importance and the positional / rare-word roles: 'ptb-sample:dev', "
        "'ptb-sample:test' or text files (one sentence per line). Default: the held-out "
        "part of the model's training data (its training.json), else ptb-sample:dev",
    )
    p.add_argument(
        "--dependencies",
        action="append",
        default=None,
        metavar="SOURCE",
        help="gold dependency trees for the syntactic role (repeatable): 'ptb-sample:dev' "
        "(unlabelled: 'attends to its head' only) or a CoNLL-U file, e.g. "
        "../shared/data/ud-ewt/en_ewt-ud-dev.conllu (per relation). Default: ptb-sample:dev",
    )
    p.add_argument(
        "--max-sentences",
        type=int,
        default=None,
        help="use at most the first N sentences of the text and of each dependency source (default: all)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="sentences per batch; importance takes |gradient| per batch, so it is recorded",
    )
    add_device_argument(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the masking of the importance text")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the table")
    add_translation_data_arguments(p)
    p.set_defaults(func=run)


def add_translation_data_arguments(p) -> None:
    """``--source`` / ``--target``: the validation pairs of a translation model (``heads``, ``prune``)."""
    group = p.add_argument_group(
        "translation models (a --model folder whose config.json has model_type syntaxformer-translation)"
    )
    group.add_argument(
        "--source",
        default=None,
        help="tokenised validation source sentences, one a line (required for a translation model)",
    )
    group.add_argument(
        "--target",
        default=None,
        help="tokenised validation references, aligned with --source (required for a translation model)",
    )
    group.add_argument(
        "--tree-cache",
        default=None,
        metavar="DIR",
        help="where a structured encoder's source trees are cached (default: not cached)",
    )


def check_translation_data(args) -> None:
    """Raise :class:`~syntaxformer.errors.InputError` unless ``--source`` and ``--target`` are given."""
    from syntaxformer.errors import InputError

    if not args.source or not args.target:
        raise InputError(f"--model {args.model} is a translation model: give --source and --target (validation pairs)")


def format_translation_heads(report: dict) -> str:
    """A translation model's importance: one block per kind, a row per layer (normalised, then raw)."""
    imp = report["importance"]
    lines = [
        f"model {report['model']} ({report['variant']}); data {report['data']['source']} / "
        f"{report['data']['target']}: {report['data']['pairs']} pairs, {imp['n_target_pieces']} target pieces, "
        f"mean cross-entropy {imp['mean_loss']:.4f} nats; batches of {imp['batch_size']}",
        f"importance: {report['protocol']['importance']}",
    ]
    for kind, section in imp["kinds"].items():
        lines.append(f"{kind} ({section['about']}): share of the total {section['share_of_total']:.3f}")
        for layer, (norm, raw) in enumerate(zip(section["normalised"], section["raw"])):
            cells = " ".join("   -  " if v is None else f"{v:6.3f}" for v in norm)
            lines.append(f"  layer {layer}: {cells}   (raw {' '.join('-' if v is None else f'{v:.2e}' for v in raw)})")
    return "\n".join(lines)


def run_translation(args) -> int:
    from syntaxformer.workflows.translation_heads import run_translation_heads

    check_translation_data(args)
    report = run_translation_heads(
        args.model,
        args.source,
        args.target,
        out=args.out,
        max_sentences=args.max_sentences,
        batch_size=args.batch_size,
        device=args.device,
        seed=args.seed,
        tree_cache=args.tree_cache,
    )
    if args.json:
        print(json.dumps({k: report[k] for k in ("model", "variant", "seed", "data", "importance", "files")}))
    else:
        print(format_translation_heads(report))
        print("wrote " + ", ".join(report["files"]))
    return 0


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_heads_report(report: dict) -> str:
    """The terminal table: one row per layer × head."""
    lines = [
        f"{'layer':>5} {'head':>4} {'imp.norm':>8} {'conf':>5} {'prev%':>6} {'next%':>6} "
        f"{'rare%':>6}  {'best relation (acc/base, gain)':<38} roles"
    ]
    positional, best = report["positional"], report["syntactic"]["best"]
    for layer in range(report["layers"]):
        for head in range(report["heads"]):
            importance = report["importance"]["normalised"][layer][head]
            if importance is None:
                lines.append(f"{layer:>5} {head:>4}  pruned")
                continue
            b = best[layer][head]
            relation = (
                "-"
                if b is None
                else (
                    f"{b['relation']} {'d->h' if b['direction'] == 'dependent_to_head' else 'h->d'} "
                    f"{_fmt(b['accuracy'], '.1f')}/{_fmt(b['baseline'], '.1f')}, {b['gain']:+.1f}"
                )
            )
            roles = []
            if positional["role"][layer][head]:
                roles.append(f"positional({positional['role'][layer][head]})")
            if report["syntactic"]["heads"][layer][head]:
                roles.append(
                    "syntactic("
                    + ",".join(sorted({e["relation"] for e in report["syntactic"]["heads"][layer][head]}))
                    + ")"
                )
            lines.append(
                f"{layer:>5} {head:>4} {importance:>8.3f} {_fmt(report['confidence'][layer][head], '.3f'):>5} "
                f"{_fmt(positional['previous'][layer][head], '.1f'):>6} "
                f"{_fmt(positional['next'][layer][head], '.1f'):>6} "
                f"{_fmt(report['rare_word']['share'][layer][head], '.1f'):>6}  {relation:<38} "
                f"{' '.join(roles)}"
            )
    return "\n".join(lines)


def summary_lines(report: dict) -> list[str]:
    """What was analysed, in a few lines (data, protocol, model, seed)."""
    text, imp = report["text"], report["importance"]
    lines = [
        f"model {report['model']} ({report['model_type']}, prior {report['prior']}, "
        f"{report['layers']} layers x {report['heads']} heads); seed {report['seed']}",
        f"text: {text['source']}: {text['n_sentences']} sentences, {text['n_words']} words, "
        f"{text['n_tokens']} tokens ({text['n_unknown']} unknown words, {text['n_split_words']} split, "
        f"{text['n_skipped_too_long']} sentences skipped as too long)",
        f"importance: {imp['n_masked_tokens']} masked tokens (rate {imp['mask_rate']}, {imp['mask_replace']}), "
        f"batches of {imp['batch_size']}, mean loss {imp['mean_loss']:.4f} nats",
        f"rare word: frequencies from {report['rare_word']['frequency_source']}",
    ]
    for dep in report["dependencies"]:
        lines.append(
            f"dependencies: {dep['source']} ({'labelled' if dep['labelled'] else 'unlabelled'}): "
            f"{dep['n_sentences']} sentences, {dep['n_words']} words ({dep['n_punctuation_removed']} "
            f"punctuation tokens removed, {dep['n_unknown']} unknown); 'attends to its head' baseline "
            f"{_fmt(dep['unlabelled_baseline'], '.1f')}% (offset {dep['unlabelled_baseline_offset']})"
        )
    return lines


def run(args) -> int:
    from syntaxformer.analysis.heads import analyse_heads, write_heads_outputs
    from syntaxformer.pretrained import model_folder
    from syntaxformer.tasks.translator import is_translation_model

    if is_translation_model(args.model):
        return run_translation(args)

    model = model_folder(args.model)
    report = analyse_heads(
        model,
        text=args.text,
        dependencies=args.dependencies or ["ptb-sample:dev"],
        seed=args.seed,
        max_sentences=args.max_sentences,
        batch_size=args.batch_size,
        device=args.device,
    )
    files = write_heads_outputs(report, args.out)
    if args.json:
        keep = ("model", "model_type", "prior", "layers", "heads", "seed", "text", "files")
        summary = {k: report[k] for k in keep}
        summary["importance"] = {k: v for k, v in report["importance"].items() if k not in ("raw",)}
        summary["positional_heads"] = sum(bool(r) for row in report["positional"]["role"] for r in row)
        summary["syntactic_heads"] = sum(bool(h) for row in report["syntactic"]["heads"] for h in row)
        print(json.dumps(summary))
    else:
        print("\n".join(summary_lines(report)))
        print(format_heads_report(report))
        print("wrote " + ", ".join(str(p) for p in files))
    return 0
