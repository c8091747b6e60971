"""``syntaxformer induce``: the main job — train, parse, score against gold, compare with baselines.

On the embedded default it trains a Tree Transformer (or ``--model structformer``) on ptb-sample's
raw words with a named recipe (:data:`RECIPES`: ``default`` <= 20 minutes on 2 CPU cores, ``long``
<= 150), recording the learning curve on ``ptb-sample:dev`` (DESIGN.md §7); then it parses
ptb-sample and scores the test half, the dev half and all of it with the field's protocol, each
beside the same model untrained (step 0: same seed, same decoder) and left-/right-branching, random
and balanced trees. This is the transductive setting (the sentences parsed are in the training text,
as the Tree Transformer paper's "WSJ-all"). It writes into ``--out``: the model folder (``model/``),
``trees.txt`` (all sentences), (StructFormer: ``dependencies.conllu``), ``report.json`` and
``curve.{png,svg}``.

A recipe is a fixed number of steps (reproducible from the seed); ``--max-minutes`` is a safety cap
that stops training early. The recipes were chosen on the dev half (``benchmarks/recipe_search.py``,
docs/recipes.md); the report says so, and the test half is the headline.
"""
from __future__ import annotations

import argparse
import inspect
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path

from syntaxformer.cli.baselines import N_SEEDS, BASELINE_NAMES, score_cell
from syntaxformer.cli.parse import add_decoder_arguments, decoder_options, write_outputs
from syntaxformer.errors import InputError
from syntaxformer.evaluation.report import format_header, format_table, to_json
from syntaxformer.models import REGISTRY

logger = logging.getLogger(__name__)

#: Named training recipes per model, from the model registry (each model file's ``RECIPES``: TrainArguments
#: fields; ``overrides`` = model config fields; ``min_layer`` = Algorithm 1's minimum layer). Chosen on
#: ptb-sample:dev by the measured search of ``benchmarks/recipe_search.py`` (docs/recipes.md); the
#: command-line flags override any field. ``default``: a fixed number of steps, <= 20 minutes on 2 idle
#: CPU cores; ``long``: <= 150 minutes.
RECIPES = {name: entry.recipes for name, entry in REGISTRY.items() if entry.recipes}

#: The learning curve's treebank when the gold treebank is ptb-sample: choices are made on dev.
CURVE_TREEBANK = "ptb-sample:dev"
#: Learning-curve points per run (step 0 and the end included).
CURVE_POINTS = 12

_TRAIN_FLAGS = ("preset", "max_steps", "max_minutes", "batch_size", "lr", "warmup_steps", "schedule",
                "schedule_steps", "mask_rate", "min_freq")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "induce", help="the main job: train on raw words, parse, score vs gold and baselines",
        description="Train a model on raw text, parse a treebank with it, score the trees against the "
                    "gold ones (sentence- and corpus-level unlabelled F1, WSJ-10, label recall) and "
                    "compare with the untrained model and left-/right-branching, random and balanced "
                    "trees. On ptb-sample: scores on the test half, the dev half and all of it.")
    p.add_argument("--model", default="tree-transformer", choices=sorted(RECIPES))
    p.add_argument("--recipe", default="default", choices=["default", "long"],
                   help="default: <= 20 min on 2 CPU cores; long: <= 150 min (syntaxformer.cli.induce.RECIPES)")
    p.add_argument("--treebank", default="ptb-sample",
                   help="gold treebank to parse and score ('ptb-sample', 'ptb-sample:dev|test' or a path)")
    p.add_argument("--dependencies", default=None,
                   help="gold dependencies of --treebank's sentences for UAS/UUAS (StructFormer): "
                        "'ptb-sample', a .conllu or .dp path (default: ptb-sample's with --treebank "
                        "ptb-sample, else none)")
    p.add_argument("--corpus", default=None,
                   help="training text: 'ptb-sample' (its words; default) or raw-text files")
    p.add_argument("--curve-treebank", default=None,
                   help="treebank of the learning curve (default: ptb-sample:dev with ptb-sample, else "
                        "--treebank); 'none' for no curve")
    p.add_argument("--out", default="induce-out", help="output folder (default induce-out)")
    p.add_argument("--seed", type=int, default=0)
    for flag in _TRAIN_FLAGS:
        kind = {"schedule": str, "preset": str, "max_minutes": float, "lr": float,
                "mask_rate": float}.get(flag, int)
        p.add_argument("--" + flag.replace("_", "-"), type=kind, default=None,
                       help="training (default: the recipe's, per model; see syntaxformer.cli.induce.RECIPES)")
    p.add_argument("--prior", default=None, help="Tree Transformer prior: constituent (default) or none")
    p.add_argument("--variant", default=None, choices=["paper", "official"],
                   help="Tree Transformer constituent variant (default: the recipe's)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument("--resume", action="store_true",
                   help="continue the training in OUT/model from its checkpoint (same command; a run cut "
                        "by --max-minutes or a signal goes on), then parse and score")
    p.add_argument("--json", action="store_true", help="print report.json instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_decoder_arguments(p)
    p.set_defaults(func=run)


def _recipe(args) -> tuple[dict, dict, int | None]:
    """(TrainArguments fields, config overrides, Algorithm 1 minimum layer) of the recipe and flags."""
    recipe = dict(RECIPES[args.model][args.recipe])
    overrides = dict(recipe.pop("overrides", {}))
    min_layer = recipe.pop("min_layer", None)
    for flag in _TRAIN_FLAGS:
        if getattr(args, flag) is not None:
            recipe[flag] = getattr(args, flag)
    if args.variant is not None:
        if "constituent_variant" not in inspect.signature(REGISTRY[args.model].config_class.__init__).parameters:
            raise InputError(f"--variant: {args.model} has no constituent variant")
        overrides["constituent_variant"] = args.variant
    _check_induces_structure(args.model, recipe["preset"], args.prior, overrides)
    return recipe, overrides, min_layer


def _check_induces_structure(model: str, preset: str, prior: str | None, overrides: dict) -> None:
    """Refuse, before any training, a model that would induce no structure (e.g. ``--prior none``:
    a plain Transformer) or an invalid configuration (InputError)."""
    from syntaxformer.models import make_config
    from syntaxformer.parsing import check_induces_structure
    fields = dict(overrides, **({} if prior is None else {"prior": prior}))
    try:
        config = make_config(model, preset, 8, **fields)
    except ValueError as e:
        raise InputError(str(e)) from None
    check_induces_structure(REGISTRY[model].model_class(config))


def _parts(treebank: str) -> dict[str, str]:
    """The gold sets scored: test, dev and all of ptb-sample, or the one treebank given."""
    from syntaxformer.data import ptb_sample_part
    if ptb_sample_part(treebank) == "all":
        return {"test": "ptb-sample:test", "dev": "ptb-sample:dev", "all": "ptb-sample"}
    return {"all": treebank}


def _decode_part(model, untrained, tokenizer, gold, options) -> dict:
    """One gold set's sentences parsed by the trained and the untrained model: ``structures``,
    ``trees``, ``heads`` (or None), ``untrained_trees`` and ``layer_trees`` ({layer: trees}, the
    Tree Transformer's single-layer decoder), each a list over the sentences."""
    from syntaxformer.parsing import decode, model_structures
    from syntaxformer.structures import LinkProbabilities
    sentences = [t.leaves() for t in gold]
    structures = model_structures(model, tokenizer, sentences)
    trees, heads = decode(structures, options)
    layer_trees = {}
    if isinstance(structures[0].constituency, LinkProbabilities):
        for layer in range(structures[0].constituency.num_layers):
            layer_trees[layer] = decode(structures, replace(options, layer=layer, min_layer=None))[0]
    return dict(structures=structures, trees=trees, heads=heads, layer_trees=layer_trees,
                untrained_trees=decode(model_structures(untrained, tokenizer, sentences), options)[0])


def _concatenate(first: dict, second: dict) -> dict:
    """Two :func:`_decode_part` results joined: ptb-sample (all) is its dev half then its test half,
    so its parses are theirs, in that order (no sentence is parsed twice)."""
    def join(a, b):
        return None if a is None else a + b
    joined = {k: join(first[k], second[k]) for k in ("structures", "trees", "heads", "untrained_trees")}
    joined["layer_trees"] = {layer: first["layer_trees"][layer] + second["layer_trees"][layer]
                             for layer in first["layer_trees"]}
    return joined


def _score_part(name: str, decoded: dict, gold, seed: int, gold_deps=None) -> dict:
    """Scores of one gold set: the model, the untrained model, every single layer, the baselines."""
    from syntaxformer.evaluation.baselines import run_baselines
    from syntaxformer.evaluation.constituency import evaluate_constituency
    part = {name: evaluate_constituency(decoded["trees"], gold),
            "untrained": evaluate_constituency(decoded["untrained_trees"], gold)}
    if decoded["layer_trees"]:
        part["single_layer"] = {}
        for layer, trees in decoded["layer_trees"].items():
            r = evaluate_constituency(trees, gold)
            part["single_layer"][str(layer)] = {k: r[k] for k in ("sentence_f1", "corpus_f1")}
    baselines = run_baselines(gold, seeds=tuple(range(seed, seed + N_SEEDS)), gold_dependencies=gold_deps)
    part.update({k: v for k, v in baselines.items() if v is not None})
    return part


def run(args: argparse.Namespace) -> int:
    from syntaxformer.data import load_gold_trees, ptb_sample_part
    from syntaxformer.evaluation.constituency import PROTOCOL
    from syntaxformer.parsing import load_model
    from syntaxformer.training.trainer import TrainArguments, initial_model, train

    start = time.monotonic()
    out = Path(args.out)
    recipe, overrides, recipe_min_layer = _recipe(args)
    corpus = args.corpus or "ptb-sample"
    parts = _parts(args.treebank)
    golds = {part: load_gold_trees(source) for part, source in parts.items()}  # bad input fails first
    curve = args.curve_treebank or (CURVE_TREEBANK if "dev" in parts else args.treebank)
    curve = None if curve == "none" else curve
    steps = recipe.get("max_steps") or 1000
    train_args = TrainArguments(out=str(out / "model"), model=args.model, corpus=corpus, seed=args.seed,
                                prior=args.prior, threads=args.threads, quiet=args.quiet, overrides=overrides,
                                eval_treebank=curve, eval_every=max(1, steps // (CURVE_POINTS - 1)),
                                device=args.device, resume=args.resume, **recipe)
    train(train_args)
    train_minutes = (time.monotonic() - start) / 60

    model, tokenizer, info = load_model(out / "model", device=args.device)
    untrained = initial_model(train_args, len(tokenizer)).to(next(model.parameters()).device).eval()
    options = decoder_options(args)
    if recipe_min_layer is not None and options.layer is None and options.min_layer is None:
        options = replace(options, min_layer=recipe_min_layer)
    dependencies = args.dependencies or (args.treebank if ptb_sample_part(args.treebank) else None)
    name = args.model.replace("-", "_")
    scores, decoded = {}, {}
    for part, gold in golds.items():
        if part == "all" and "dev" in decoded:
            decoded[part] = _concatenate(decoded["dev"], decoded["test"])
            assert [x.words for x in decoded[part]["structures"]] == [t.leaves() for t in gold]
        else:
            decoded[part] = _decode_part(model, untrained, tokenizer, gold, options)
        heads = decoded[part]["heads"]
        gold_deps = _gold_dependencies(dependencies, part, parts, heads)
        scores[part] = _score_part(name, decoded[part], gold, args.seed, gold_deps)
        if heads is not None and gold_deps:
            scores[part]["dependency"] = _dependency_scores(name, gold, heads, gold_deps,
                                                             scores[part].get("dependency") or {})
    everything = decoded["all"]
    outputs = (everything["trees"], everything["heads"], everything["structures"],
               [t.leaves() for t in golds["all"]])
    write_outputs(out, *outputs)
    report = _report(args, corpus, parts, golds, info, recipe, overrides, options, curve, scores,
                     train_minutes, start, PROTOCOL)
    (out / "report.json").write_text(to_json(report) + "\n")
    if info.get("parse_curve"):
        _curve_figure(out, info, report)
    print(to_json(report) if args.json else format_induce_report(report))
    return 0


def _gold_dependencies(dependencies, part, parts, heads):
    """Gold dependencies of one part, or None: ptb-sample's own for each of its halves; a file given
    with ``--dependencies`` covers the whole treebank, so it scores the part ``all`` only."""
    from syntaxformer.data import ptb_sample_part
    if heads is None:
        return None
    if dependencies is None:
        logger.warning("no gold dependencies for %s: pass --dependencies to score UAS/UUAS", parts[part])
        return None
    from syntaxformer.data.dependency import read_dependencies
    if ptb_sample_part(dependencies) == "all":
        return read_dependencies(parts[part])
    return read_dependencies(dependencies) if part == "all" else None


def _dependency_scores(name: str, gold, heads, gold_deps, chains) -> dict:
    """UAS/UUAS of the predicted heads beside the dependency-chain baselines (``chains``)."""
    from syntaxformer.data.dependency import DependencySentence
    from syntaxformer.evaluation.dependency import evaluate_dependency
    pred = [DependencySentence(tuple(t.leaves()), ("X",) * len(h), tuple(h), (False,) * len(h))
            for t, h in zip(gold, heads)]
    return {name: evaluate_dependency(pred, gold_deps), **chains}


def _report(args, corpus, parts, golds, info, recipe, overrides, options, curve, scores, train_minutes,
            start, protocol) -> dict:
    """report.json: data, protocol, recipe, how it was chosen, and the scores of every part."""
    name = args.model.replace("-", "_")
    primary = "test" if "test" in scores else "all"
    from syntaxformer.data import ptb_sample_part
    transductive = corpus == args.treebank or (ptb_sample_part(corpus) == "all"
                                               and ptb_sample_part(args.treebank) is not None)
    setting = ("transductive (the parsed sentences' words are in the training text)" if transductive
               else "inductive (or unknown: check the corpus)")
    keep = ("steps", "minutes", "tokens_per_second", "stopped", "initial_valid_loss", "final_train_loss",
            "final_valid_loss", "parameters", "device")
    return {
        "data": {"train": corpus, "treebank": args.treebank, "n_sentences": len(golds[primary]),
                 "parts": {p: {"source": s, "n_sentences": len(golds[p])} for p, s in parts.items()},
                 "setting": setting},
        "protocol": protocol, "model": args.model, "preset": recipe["preset"], "seed": args.seed,
        "recipe": args.recipe, "primary": primary,
        "selection": "recipe, decoder and minimum layer chosen on ptb-sample:dev (docs/recipes.md); "
                     "the test half was not used for any choice",
        "training": {k: info.get(k) for k in keep if k in info} | {"recipe": recipe, "config": overrides},
        "decoder": asdict(options),
        "decoder_rules": "no tie-breaking toward either direction beyond Algorithm 1's leftmost weakest "
                         "link (and the distance split's leftmost largest distance); no fallback to "
                         "right-branching",
        **scores[primary],
        "parts": scores,
        "curve": ({"treebank": curve, "points": info["parse_curve"]["points"]} if info.get("parse_curve")
                  else None),
        "minutes": {"train": round(train_minutes, 2), "total": round((time.monotonic() - start) / 60, 2)},
    }


def _curve_figure(out: Path, info: dict, report: dict) -> None:
    """OUT/curve.{png,svg}: the dev F1 of the report's decoder and every single layer vs minutes."""
    from syntaxformer.figures import plot_parse_curve, save_figure
    points = info["parse_curve"]["points"]
    decoders = list(points[0]["scores"])
    decoder = report["decoder"]
    main = ("distance" if "distance" in decoders else f"layer{decoder['layer']}" if decoder["layer"] is not None
            else f"algorithm1_m{decoder['min_layer'] or 0}")
    shown = [main] + [d for d in decoders if d.startswith("layer") and d != main][:6]
    part = "dev" if "dev" in report["parts"] else "all"
    baselines = {"right-branching": report["parts"][part]["right_branching"]["sentence_f1"],
                 "balanced": report["parts"][part]["balanced"]["sentence_f1"],
                 "random": report["parts"][part]["random"]["sentence_f1"]}
    title = (f"{report['model']} (recipe {report['recipe']}, seed {report['seed']}): sentence F1 on "
             f"{info['parse_curve']['treebank']}")
    save_figure(plot_parse_curve(points, shown, baselines, title), out / "curve")


def format_induce_report(report: dict) -> str:
    """The tables of ``induce``: per scored part, the model beside the untrained model and every baseline."""
    name = report["model"].replace("-", "_")
    names = {name: report["model"], "untrained": "same model, untrained (step 0)", **BASELINE_NAMES}
    header = format_header("syntaxformer induce", {
        "model": f"{report['model']} (preset {report['preset']}, recipe {report['recipe']}, seed {report['seed']})",
        "training": f"{report['data']['train']}, {report['training'].get('steps', '?')} steps, "
                    f"{report['minutes']['train']:.1f} min",
        "treebank": f"{report['data']['treebank']} ({report['data']['setting']})",
        "protocol": report["protocol"],
        "decoder": ", ".join(f"{k}={v}" for k, v in report["decoder"].items()),
        "chosen": report["selection"],
    })
    keys = ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1", "mean_depth")
    parts = [header]
    for part, scores in report["parts"].items():
        rows = [n for n in names if n in scores]
        source = report["data"]["parts"][part]
        parts.append(f"{part}: {source['source']}, {source['n_sentences']:,} sentences\n" + format_table(
            ["trees", "sentence F1", "corpus F1", "WSJ-10 sent. F1", "WSJ-10 corpus F1", "mean depth"],
            [[names[n]] + [score_cell(scores[n], k) for k in keys] for n in rows]))
        if scores.get("single_layer"):
            parts.append("single-layer decoder (paper Fig. 4(b)), sentence F1 by layer: " + ", ".join(
                f"{layer}: {r['sentence_f1']:.2f}" for layer, r in scores["single_layer"].items()))
        if scores.get("dependency"):
            parts.append(format_table(["dependencies", "UAS", "UUAS"],
                                      [[k.replace("_", " "), v["uas"], v["uuas"]]
                                       for k, v in scores["dependency"].items()]))
    labels = list(report[name]["label_recall"])
    rows = [n for n in names if n in report]
    parts.append(f"label recall ({report['primary']})\n" + format_table(
        ["recall (%)"] + labels,
        [[names[n]] + [score_cell(report[n], "label_recall", lab) for lab in labels] for n in rows]))
    return "\n\n".join(parts)
