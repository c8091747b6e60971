"""The main job (``syntaxformer induce``): train, parse, score against gold, compare with baselines.

:func:`run_induce` trains a model of the registry (:data:`syntaxformer.recipes.RECIPES`: named recipes per model) on raw
words, recording the learning curve (on ``ptb-sample:dev`` with ptb-sample, DESIGN.md §7); then it
parses the gold treebank and scores it with the field's protocol -- on ptb-sample its test half, its
dev half and all of it --, each beside the same model untrained (step 0: same seed, same decoder) and
left-/right-branching, random and balanced trees. With ptb-sample as both corpus and treebank this is
the transductive setting (the sentences parsed are in the training text, as the Tree Transformer
paper's "WSJ-all"). It writes into ``out``: the model folder (``model/``), ``trees.txt`` (all
sentences), (with dependency heads: ``dependencies.conllu``), ``report.json`` and ``curve.{png,svg}``.

A recipe is a fixed number of steps (reproducible from the seed, the same model on any machine); no
wall-clock cap cuts it unless the user asks (``max_minutes``): a run stopped early says so in the report
(``training.steps`` of ``training.planned_steps``, ``training.complete``) and in the printed header. The recipes were chosen on the dev half (``benchmarks/studies/recipe_search/recipe_search.py``,
docs/results/induce/recipes.md); the report says so, and the test half is the headline.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch

from syntaxformer.data import GoldTrees, load_gold_trees, ptb_sample_part
from syntaxformer.data.corpus import corpus_items, is_shipped_text
from syntaxformer.data.dependency import DependencySentence, read_dependencies
from syntaxformer.data.wikitext import WIKITEXT_2
from syntaxformer.errors import InputError
from syntaxformer.evaluation.baselines import run_baselines
from syntaxformer.evaluation.constituency import PROTOCOL, evaluate_constituency, read_gold_brackets
from syntaxformer.evaluation.curve import curve_decoder_name
from syntaxformer.evaluation.dependency import evaluate_dependency
from syntaxformer.evaluation.protocols import DEFAULT_PROTOCOL, PROTOCOLS, Protocol, get_protocol
from syntaxformer.evaluation.report import to_json
from syntaxformer.figures import plot_parse_curve, save_figure
from syntaxformer.models import MODELS, capabilities_of, default_architecture
from syntaxformer.parsing import DecoderOptions, check_induces_structure, decode, load_model, model_structures
from syntaxformer.recipes import RECIPES, get_recipe
from syntaxformer.runtime import code_version
from syntaxformer.structures import Structures, save_decoder_options
from syntaxformer.tasks.language_model import TrainArguments, initial_model
from syntaxformer.tasks.run import train as train_model
from syntaxformer.training.arguments import check_choices, option
from syntaxformer.training.model_config import resolve_model_config
from syntaxformer.workflows.baselines import random_seeds
from syntaxformer.workflows.evaluate import protocol_fields
from syntaxformer.workflows.outputs import write_outputs

logger = logging.getLogger(__name__)

#: The learning curve's treebank when the gold treebank is ptb-sample: choices are made on dev.
CURVE_TREEBANK = "ptb-sample:dev"
#: Learning-curve points per run (step 0 and the end included).
CURVE_POINTS = 12


def resolve_recipe(
    model: str,
    recipe: str = "default",
    train: dict | None = None,
    variant: str | None = None,
    prior: str | None = None,
    config: dict | None = None,
) -> tuple[dict, dict, int | None]:
    """The training of a named recipe with some fields replaced (:func:`run_induce` checks the
    resulting model before any work).

    Args:
        model: a registry name with recipes (a key of :data:`RECIPES`).
        recipe: the recipe's name (``default``, ``long``; ``paper``: the authors' procedure, where a model has it).
        train: TrainArguments fields replacing the recipe's (None values are ignored).
        variant: the Tree Transformer's constituent variant (``paper``, ``official``), or None.
        prior: the model's prior (None = the model's default); only passed on to the config.
        config: further model config fields (``induce --set``), applied last.

    Returns:
        ``(TrainArguments fields, model config overrides, Algorithm 1 minimum layer or None)``.

    Raises:
        InputError: a recipe the model does not have, or ``variant`` for a model without one.
    """
    chosen = get_recipe(model, recipe)
    fields, overrides, min_layer = chosen.fields(), dict(chosen.config), chosen.min_layer
    fields.update({k: v for k, v in (train or {}).items() if v is not None})
    if variant is not None:
        if not capabilities_of(MODELS[model]).constituent_variant:
            raise InputError(f"--variant: {model} has no constituent variant")
        overrides["constituent_variant"] = variant
    overrides.update(config or {})
    return fields, overrides, min_layer


def _check_induces_structure(model: str, preset: str, prior: str | None, overrides: dict, options=None) -> None:
    """Refuse, before any training, a model that would induce no structure (e.g. ``--prior none``:
    a plain Transformer), an invalid configuration, or decoder options its structures do not take:
    the untrained model (vocabulary of 8; its config resolved as the trainer resolves it,
    :func:`~syntaxformer.training.model_config.resolve_model_config`) parses a three-token sentence with ``options`` (InputError)."""

    config = resolve_model_config(model, preset, 8, prior, overrides)  # the config training will resolve
    try:
        net = MODELS[model](config).eval()
    except (ValueError, TypeError) as e:
        raise InputError(f"cannot build {model} / {preset}: {e}") from None
    check_induces_structure(net)
    if options is not None:
        with torch.no_grad():
            induced = net.induce(torch.tensor([[4, 5, 6]]), torch.ones(1, 3, dtype=torch.long))[0]
        sentence = Structures(["a", "b", "c"], induced)
        sentence.spans(options)
        sentence.heads(options)


def _parts(treebank: str) -> dict[str, str]:
    """The gold sets scored: test, dev and all of ptb-sample, or the one treebank given."""
    if ptb_sample_part(treebank) == "all":
        return {"test": "ptb-sample:test", "dev": "ptb-sample:dev", "all": "ptb-sample"}
    return {"all": treebank}


def _load_golds(parts: dict[str, str]) -> dict[str, GoldTrees]:
    """The preprocessed gold trees of each part of :func:`_parts`, in its order; ptb-sample's whole
    joined from its halves (its files in order: dev, then test) rather than read again.

    Raises:
        InputError: as :func:`~syntaxformer.data.load_gold_trees`.
    """
    golds = {part: load_gold_trees(source) for part, source in parts.items() if part != "all"}
    halves = "dev" in golds and "test" in golds
    golds["all"] = (
        GoldTrees.joined(golds["dev"], golds["test"], parts["all"]) if halves else load_gold_trees(parts["all"])
    )
    return golds


def _decode_part(model, untrained, tokenizer, gold, options) -> dict:
    """One gold set's sentences parsed by the trained and the untrained model: ``structures``,
    ``trees``, ``heads`` (or None), ``untrained_trees`` and ``layer_trees`` ({layer: trees}, the
    single-layer decoder of a structure with layers: the Tree Transformer's link probabilities,
    ON-LSTM's distances), each a list over the sentences."""
    sentences = [t.leaves() for t in gold]
    structures = model_structures(model, tokenizer, sentences)
    trees, heads = decode(structures, options)
    layer_trees = {}
    for layer in range(getattr(structures[0].constituency, "num_layers", 0)):
        layer_trees[layer] = decode(structures, replace(options, layer=layer, min_layer=None))[0]
    return dict(
        structures=structures,
        trees=trees,
        heads=heads,
        layer_trees=layer_trees,
        untrained_trees=decode(model_structures(untrained, tokenizer, sentences), options)[0],
    )


def _concatenate(first: dict, second: dict) -> dict:
    """Two :func:`_decode_part` results joined: ptb-sample (all) is its dev half then its test half,
    so its parses are theirs, in that order (no sentence is parsed twice)."""

    def join(a, b):
        return None if a is None else a + b

    joined = {k: join(first[k], second[k]) for k in ("structures", "trees", "heads", "untrained_trees")}
    joined["layer_trees"] = {
        layer: first["layer_trees"][layer] + second["layer_trees"][layer] for layer in first["layer_trees"]
    }
    return joined


def _score_part(name: str, decoded: dict, gold, seed: int, gold_deps=None, protocol: Protocol | None = None) -> dict:
    """Scores of one gold set: the model, the untrained model, every single layer, the baselines, all
    under ``protocol`` (None: ``prpn``, :func:`~syntaxformer.evaluation.constituency.evaluate_constituency`'s
    dict with WSJ-10, label recall and mean depth; else the protocol's :meth:`Protocol.score` dict).
    A single layer keeps the sentence and corpus F1 its protocol gives (``evalb``: corpus F1 only)."""

    read = read_gold_brackets(gold) if protocol is None else None  # once for the model, its layers and the control

    def score(trees):
        return evaluate_constituency(trees, gold, read=read) if protocol is None else protocol.score(trees, gold)

    part = {name: score(decoded["trees"]), "untrained": score(decoded["untrained_trees"])}
    if decoded["layer_trees"]:
        part["single_layer"] = {}
        for layer, trees in decoded["layer_trees"].items():
            r = score(trees)
            part["single_layer"][str(layer)] = {k: r[k] for k in ("sentence_f1", "corpus_f1") if k in r}
    baselines = run_baselines(gold, random_seeds(seed), gold_deps, protocol, read)
    part.update({k: v for k, v in baselines.items() if v is not None})
    return part


def _gold_dependencies(dependencies, part, parts, heads):
    """Gold dependencies of one part, or None: ptb-sample's own for each of its halves; a file given
    with ``--dependencies`` covers the whole treebank, so it scores the part ``all`` only."""
    if heads is None:
        return None
    if dependencies is None:
        logger.warning("no gold dependencies for %s: pass --dependencies to score UAS/UUAS", parts[part])
        return None
    if ptb_sample_part(dependencies) == "all":
        return read_dependencies(parts[part])
    return read_dependencies(dependencies) if part == "all" else None


def _dependency_scores(name: str, gold, heads, gold_deps, chains) -> dict:
    """UAS/UUAS of the predicted heads beside the dependency-chain baselines (``chains``)."""
    pred = [
        DependencySentence(tuple(t.leaves()), ("X",) * len(h), tuple(h), (False,) * len(h)) for t, h in zip(gold, heads)
    ]
    return {name: evaluate_dependency(pred, gold_deps), **chains}


def _decode_and_score(
    model_name: str,
    model,
    untrained,
    tokenizer,
    golds: dict,
    parts: dict,
    options,
    dependencies: str | None,
    seed: int,
    protocol: Protocol | None = None,
) -> tuple[dict, dict]:
    """Parse and score every gold set (``all`` of ptb-sample joins its halves' parses) under
    ``protocol`` (None: ``prpn``; :func:`_score_part`): ``(scores, decoded)``, both keyed by part."""
    name = model_name.replace("-", "_")
    scores, decoded = {}, {}
    for part, gold in golds.items():
        if part == "all" and "dev" in decoded:
            decoded[part] = _concatenate(decoded["dev"], decoded["test"])
            assert [x.words for x in decoded[part]["structures"]] == [t.leaves() for t in gold]
        else:
            decoded[part] = _decode_part(model, untrained, tokenizer, gold, options)
        heads = decoded[part]["heads"]
        gold_deps = _gold_dependencies(dependencies, part, parts, heads)
        scores[part] = _score_part(name, decoded[part], gold, seed, gold_deps, protocol)
        if heads is not None and gold_deps:
            scores[part]["dependency"] = _dependency_scores(
                name, gold, heads, gold_deps, scores[part].get("dependency") or {}
            )
    return scores, decoded


def _protocol_entries(protocol: Protocol | None) -> dict:
    """What report.json says of its protocol: ``prpn`` (None): ``protocol`` = the long-standing
    :data:`~syntaxformer.evaluation.constituency.PROTOCOL` string, as before ``--protocol``; another:
    ``protocol`` (its rules), ``protocol_name`` and ``protocol_source``."""
    return {"protocol": PROTOCOL} if protocol is None else protocol_fields(protocol)


def _curve_entry(curve: str | None, info: dict, protocol: Protocol | None) -> dict | None:
    """report.json's ``curve``: the learning curve's treebank and points (None without a curve); with a
    protocol other than ``prpn`` also ``protocol: "prpn"``, the curve's own (it is scored in training)."""
    if not info.get("parse_curve"):
        return None
    entry = {"treebank": curve, "points": info["parse_curve"]["points"]}
    return entry if protocol is None else entry | {"protocol": DEFAULT_PROTOCOL}


@dataclass
class InduceRecord:
    """What an ``induce`` run was and how it is scored, as its report records it.

    Attributes:
        model: the registry name trained.
        recipe: the recipe's name.
        treebank: the gold trees parsed.
        corpus: the training text.
        seed: the run's seed.
        recipe_text: the text the recipe names (e.g. ``ptb-lm``), or None.
        train: the training fields (TrainArguments; the report's ``training.recipe``).
        overrides: the model config overrides.
        options: the decoder settings scored (:class:`DecoderOptions`).
        curve: the learning curve's treebank, or None.
        dependencies: gold dependencies for UAS (None: ptb-sample's with ptb-sample).
        protocol: the scoring protocol (None = ``prpn``).
    """

    model: str
    recipe: str
    treebank: str
    corpus: str
    seed: int
    recipe_text: str | None
    train: dict
    overrides: dict
    options: DecoderOptions
    curve: str | None = None
    dependencies: str | None = None
    protocol: Protocol | None = None
    note: str | None = None


def _report(job: InduceRecord, parts, golds, info, scores, train_minutes, start) -> dict:
    """report.json: data, protocol, recipe, how it was chosen, and the scores of every part."""
    primary = "test" if "test" in scores else "all"
    corpus, treebank, recipe, protocol = job.corpus, job.treebank, job.train, job.protocol
    on_sample = ptb_sample_part(treebank) is not None
    items = corpus_items(corpus)
    transductive = corpus == treebank or ("ptb-sample" in items and on_sample)
    setting = (
        "transductive (the parsed sentences' words are in the training text; the WikiText-2 part of it is "
        "out of the treebank's domain)"
        if transductive and WIKITEXT_2 in items
        else "transductive (the parsed sentences' words are in the training text)"
        if transductive
        else "transductive (the ptb-lm training text contains ptb-sample's sentences)"
        if job.recipe_text == "ptb-lm" and on_sample
        else "inductive (or unknown: check the corpus)"
    )
    keep = (
        "steps",
        "epochs",
        "minutes",
        "train_minutes_total",
        "resumed_from_steps",
        "tokens_per_second",
        "stopped",
        "initial_valid_loss",
        "final_train_loss",
        "final_valid_loss",
        "parameters",
        "device",
        "code",
        "running_text",
    )
    return {
        "data": {
            "train": corpus,
            "recipe_text": job.recipe_text,
            "treebank": treebank,
            "n_sentences": len(golds[primary]),
            "parts": {p: {"source": s, "n_sentences": len(golds[p])} for p, s in parts.items()},
            "setting": setting,
        },
        **_protocol_entries(protocol),
        "model": job.model,
        "preset": recipe["preset"],
        "seed": job.seed,
        "recipe": job.recipe,
        **({"note": job.note} if job.note else {}),
        "code": code_version(),
        "primary": primary,
        "selection": "recipe, decoder and minimum layer chosen on ptb-sample:dev (docs/results/induce/recipes.md); "
        "the test half was not used for any choice",
        "training": {k: info.get(k) for k in keep if k in info}
        | {
            "planned_steps": recipe.get("max_steps"),
            "planned_epochs": None if recipe.get("max_steps") else recipe.get("epochs"),
            "complete": _complete(recipe, info),
            "recipe": recipe,
            "config": job.overrides,
        },
        "decoder": asdict(job.options),
        "decoder_rules": "no tie-breaking toward either direction beyond Algorithm 1's leftmost weakest "
        "link (and the distance split's leftmost largest distance); no fallback to "
        "right-branching",
        **scores[primary],
        "parts": scores,
        "curve": _curve_entry(job.curve, info, protocol),
        "minutes": {"train": round(train_minutes, 2), "total": round((time.monotonic() - start) / 60, 2)},
    }


def _curve_figure(out: Path, info: dict, report: dict, golds: dict, protocol: Protocol | None) -> None:
    """OUT/curve.{png,svg}: the dev F1 of the report's decoder and every single layer vs minutes, beside
    the baselines' sentence F1 under the curve's protocol (``prpn``: the report's; under another
    ``protocol`` they are scored again with ``prpn`` on the same gold part, ``golds[part]``)."""
    points = info["parse_curve"]["points"]
    decoders = list(points[0]["scores"])
    main = curve_decoder_name(report["decoder"], decoders)
    shown = [main] + [d for d in decoders if d.startswith("layer") and d != main][:6]
    part = "dev" if "dev" in report["parts"] else "all"
    scored = report["parts"][part] if protocol is None else run_baselines(golds[part], random_seeds(report["seed"]))
    baselines = {
        "right-branching": scored["right_branching"]["sentence_f1"],
        "balanced": scored["balanced"]["sentence_f1"],
        "random": scored["random"]["sentence_f1"],
    }
    title = (
        f"{report['model']} (recipe {report['recipe']}, seed {report['seed']}): sentence F1 on "
        f"{info['parse_curve']['treebank']}"
    )
    save_figure(plot_parse_curve(points, shown, baselines, title), out / "curve")


def _complete(recipe: dict, info: dict) -> bool:
    """Whether training ran the recipe's whole length: its steps, or (a recipe of epochs) its epochs."""
    if recipe.get("max_steps"):
        return info.get("steps") == recipe["max_steps"]
    if recipe.get("epochs"):
        return (info.get("epochs") or 0) >= recipe["epochs"]
    return True


def curve_period(steps: int) -> int:
    """The learning curve's period (``eval_every``) for a run of a fixed number of steps.

    Args:
        steps: the run's optimizer steps.
    Returns:
        ``ceil(steps / (CURVE_POINTS - 1))``, at least 1: the curve (step 0, every period, the end) has at
        most :data:`CURVE_POINTS` points (7,000 steps: every 637, 12 points; 20 steps: every 2, 11
        points; 5 steps: every step, 6 points).
    """
    return max(1, -(-steps // (CURVE_POINTS - 1)))


def recipe_decoder(model: str, recipe: str) -> dict:
    """The decoder settings a recipe names besides its minimum layer (its ``decoder`` entry, e.g. the
    Tree Transformer ``paper`` recipe's public descend rule), as :class:`DecoderOptions` fields; {}
    when it names none or is not a recipe of ``model``."""
    chosen = RECIPES.get(model, {}).get(recipe)
    return dict(chosen.decoder) if chosen else {}


def recipe_note(model: str, recipe: str) -> str | None:
    """What a recipe's trees amount to, in one sentence (its ``note`` entry), recorded in ``report.json``
    and printed in ``induce``'s header; None when it has none or is not a recipe of ``model``."""
    chosen = RECIPES.get(model, {}).get(recipe)
    return chosen.note if chosen else None


def induce_decoder_options(options, min_layer: int | None, decoder: dict | None = None):
    """The decoder settings ``induce`` scores (and saves with) the model: the recipe's Algorithm 1
    minimum layer (and further settings) with the user's choices over them.

    Args:
        options: None; a dict of chosen settings (flags), put over the recipe's
            (:meth:`~syntaxformer.structures.DecoderOptions.with_choices`); or a full
            :class:`~syntaxformer.structures.DecoderOptions`, taking the recipe's minimum layer unless
            it names a layer or a minimum layer.
        min_layer: the recipe's minimum layer (None: the decoder's default).
        decoder: the recipe's further settings (:func:`recipe_decoder`), under the user's choices.
    Returns:
        A :class:`~syntaxformer.structures.DecoderOptions`.
    """

    recipe = DecoderOptions(min_layer=min_layer).with_choices(decoder)
    if options is None or not isinstance(options, DecoderOptions):
        return recipe.with_choices(options)
    if min_layer is not None and options.layer is None and options.min_layer is None:
        options = replace(options, min_layer=min_layer)
    return options


@dataclass
class InduceJob:
    """What ``induce`` parses and scores, and how: the job's own choices (the training's are a
    :class:`~syntaxformer.training.arguments.TrainArguments`, :func:`induce_training`). Each field is a
    ``syntaxformer induce`` option (its ``help`` metadata), but for ``decoder``, which the decoder flags fill.

    Raises (:meth:`check`):
        InputError: a recipe name no model has, an unknown variant.
    """

    out: str = option("induce-out", help="output folder")
    recipe: str = option(
        "default",
        choices=tuple(sorted({name for named in RECIPES.values() for name in named})),
        help="the recipe: 'default' (<= 20 min on 2 CPU cores; the Tree Transformer's on ptb-sample and the "
        "embedded WikiText-2); 'sample' (the Tree Transformer's default setting on ptb-sample alone); "
        "'long' (<= 150 min, on the ptb-lm training text (Tree Transformer, StructFormer: give its path with "
        "--corpus)); 'paper': the authors' procedure (ON-LSTM: running text, SGD then NT-ASGD; give --corpus "
        "and --valid); --list-recipes prints them all",
    )
    treebank: str = option(
        "ptb-sample", help="gold treebank to parse and score ('ptb-sample', 'ptb-sample:dev|test' or a path)"
    )
    dependencies: str | None = option(
        None,
        help="gold dependencies of --treebank's sentences for UAS/UUAS (StructFormer): 'ptb-sample', a .conllu "
        "or .dp path (default: ptb-sample's with --treebank ptb-sample, else none)",
    )
    curve_treebank: str | None = option(
        None,
        help="treebank of the learning curve (default: ptb-sample:dev with ptb-sample, else --treebank); "
        "'none' for no curve",
    )
    protocol: str = option(
        DEFAULT_PROTOCOL,
        help="constituency scoring protocol of every part's scores (model, untrained model, single layers, "
        "baselines): "
        + ", ".join(PROTOCOLS)
        + " (docs/reference/protocols.md); the learning curve is scored with prpn",
    )
    variant: str | None = option(
        None, choices=("paper", "official"), help="Tree Transformer constituent variant (default: the recipe's)"
    )
    decoder: object = None  # decoder settings chosen: None, a dict of flags or DecoderOptions (induce_decoder_options)

    def check(self) -> None:
        """The declared choices (:func:`~syntaxformer.training.arguments.check_choices`)."""
        check_choices(self)


#: the TrainArguments fields an ``induce`` run may replace in its recipe (``induce``'s options for them
#: default to "the recipe's"); the report records the recipe's fields with these over them
REPLACEABLE = (
    "preset",
    "max_steps",
    "epochs",
    "max_minutes",
    "valid",
    "exclude_treebank",
    "batch_size",
    "lr",
    "warmup_steps",
    "schedule",
    "schedule_steps",
    "mask_rate",
    "min_freq",
    "bf16",
)
#: how the training step runs on an accelerator (``syntaxformer train``'s options; DESIGN.md §5.1): not the
#: recipe's, recorded with it in the report when they differ from TrainArguments' defaults
STEP_FIELDS = ("fixed_shapes", "pad_to_multiple", "prefetch", "tf32", "step_graph")


def induce_training(job: InduceJob, given: dict) -> TrainArguments:
    """The training of ``job``: its recipe's fields, the given fields over them, into ``OUT/model``.

    Args:
        job: the job (its recipe, variant and output folder are read).
        given: TrainArguments fields: ``model`` (None: the registry's default language model), the job's
            run (``corpus``, ``seed``, ``prior``, ``threads``, ``device``, ``quiet``, ``resume``), the
            model config ``overrides`` (put over the recipe's and the variant), the :data:`REPLACEABLE`
            fields (None: the recipe's) and the :data:`STEP_FIELDS`.
    Returns:
        The :class:`~syntaxformer.training.arguments.TrainArguments` (not yet checked: training checks it).
    Raises:
        InputError: a recipe the model lacks, ``variant`` for a model without one, a recipe that names a
            text that is not shipped with no ``corpus`` given.
    """
    given = dict(given)
    model = given.pop("model", None) or default_architecture("language_model")
    replaced = {name: given.pop(name) for name in REPLACEABLE if name in given}
    overrides = dict(given.pop("overrides", None) or {})
    prior = given.get("prior")
    train, overrides, _ = resolve_recipe(model, job.recipe, replaced, job.variant, prior, overrides)
    recipe_text = train.pop("corpus", None)
    corpus = given.pop("corpus", None)
    if recipe_text is not None and corpus is None and not is_shipped_text(recipe_text):
        raise InputError(
            f"the {job.recipe} recipe of {model} trains on the {recipe_text} training text, which is not "
            f"shipped: give it with --corpus (e.g. ../shared/data/ptb-lm/ptb.train.txt; DESIGN.md §6)"
        )
    corpus = corpus or recipe_text or "ptb-sample"  # an unshipped recipe text was refused above
    run = {name: given.get(name) for name in ("seed", "prior", "threads", "quiet", "device", "resume")}
    run["seed"] = run["seed"] or 0
    steps = {name: given[name] for name in STEP_FIELDS if name in given}
    out = str(Path(job.out) / "model")
    return TrainArguments(out=out, model=model, corpus=corpus, overrides=overrides, **run, **train, **steps)


def recorded_training(train: TrainArguments, recipe: str) -> dict:
    """The training fields the report records (``training.recipe``): the recipe's fields with the run's
    values, and the replaceable and step fields the run set other than TrainArguments' defaults.

    Raises:
        InputError: ``recipe`` is not a recipe of ``train.model``.
    """
    names = list(get_recipe(train.model, recipe).train)
    defaults = {f.name: f.default for f in fields(TrainArguments)}
    names += [n for n in (*REPLACEABLE, *STEP_FIELDS) if n not in names and getattr(train, n) != defaults[n]]
    return {name: getattr(train, name) for name in names}


def run_induce(job: InduceJob, train: TrainArguments) -> dict:
    """Train ``train.model`` on raw words, parse ``job.treebank``, score it beside the untrained model and
    the baselines; write the model folder, ``trees.txt``, ``dependencies.conllu`` (with heads),
    ``report.json`` and ``curve.{png,svg}`` (with a curve) into ``job.out``.

    Args:
        job: what is parsed and scored (:class:`InduceJob`): the output folder (the model goes to
            ``OUT/model``), the recipe, the gold treebank (``'ptb-sample'``: its test, dev and all; or a
            path), gold dependencies for UAS/UUAS (None: ptb-sample's with ptb-sample, else none), the
            learning curve's treebank (None: ptb-sample:dev with ptb-sample, else the treebank;
            ``'none'``: no curve), the scoring protocol (every part's scores; the learning curve is scored
            with ``prpn`` during training whatever the protocol) and the decoder settings chosen
            (:func:`induce_decoder_options`) over the recipe's. The settings scored are saved with the
            model (``OUT/model/decoder.json``), so ``parse --model OUT/model`` gives the trees scored here.
        train: the training (:func:`induce_training`); its seed also seeds the untrained model and the
            random baseline (seed .. seed + 4); ``resume`` continues ``OUT/model``'s training.

    Returns:
        The report (``report.json``): data, protocol (and, not ``prpn``, protocol_name and
        protocol_source), model, preset, seed, recipe, primary part, training, decoder, the primary
        part's scores at the top level, ``parts`` (every part's), ``curve`` and ``minutes``.

    Raises:
        InputError: an unknown protocol or recipe, bad gold trees or dependencies, bad training options, a
            model inducing nothing.
    """

    start = time.monotonic()
    job.check()
    chosen = get_protocol(job.protocol)  # an unknown protocol is refused before any work
    chosen = None if chosen.name == DEFAULT_PROTOCOL else chosen
    recipe = get_recipe(train.model, job.recipe)
    options = induce_decoder_options(job.decoder, recipe.min_layer, dict(recipe.decoder))
    # a model that induces nothing, or decoder options its structures do not take: refused before any work
    _check_induces_structure(train.model, train.preset, train.prior, train.overrides or {}, options)
    out, parts = Path(job.out), _parts(job.treebank)
    golds = _load_golds(parts)  # bad input fails first
    curve = job.curve_treebank or (CURVE_TREEBANK if "dev" in parts else job.treebank)
    curve = None if curve == "none" else curve
    every = curve_period(train.max_steps) if train.max_steps else (0 if train.epochs else curve_period(1000))
    train = replace(train, eval_treebank=curve, eval_every=every)
    train_model(train)
    train_minutes = (time.monotonic() - start) / 60

    trained, tokenizer, info = load_model(out / "model", device=train.device)
    untrained = initial_model(train, len(tokenizer)).to(next(trained.parameters()).device).eval()
    record = InduceRecord(
        model=train.model,
        recipe=job.recipe,
        treebank=job.treebank,
        corpus=train.corpus,
        seed=train.seed,
        recipe_text=recipe.corpus,
        train=recorded_training(train, job.recipe),
        overrides=dict(train.overrides),
        options=options,
        curve=curve,
        dependencies=job.dependencies,
        protocol=chosen,
        note=recipe.note,
    )
    scored = _TrainedModel(trained, untrained, tokenizer, info, train_minutes)
    return _score_and_write(out, record, golds, scored, start)


@dataclass
class _TrainedModel:
    """What :func:`_score_and_write` scores: the trained model, the same model untrained (step 0), their
    tokenizer, the training record (``training.json``) and the training's minutes."""

    trained: torch.nn.Module
    untrained: torch.nn.Module
    tokenizer: object
    info: dict
    train_minutes: float


def _score_and_write(out: Path, job: InduceRecord, golds, scored: _TrainedModel, start: float, amend=None) -> dict:
    """Parse and score ``golds`` with ``scored``'s models, save the job's decoder options with the trained
    one, write ``trees.txt``, ``dependencies.conllu``, ``report.json`` and the curve figure into ``out``;
    returns the report. ``amend(report)``, if given, changes the report in place before it is written."""
    save_decoder_options(out / "model", job.options)
    parts = _parts(job.treebank)
    dependencies = job.dependencies or (job.treebank if ptb_sample_part(job.treebank) else None)
    scores, decoded = _decode_and_score(
        job.model,
        scored.trained,
        scored.untrained,
        scored.tokenizer,
        golds,
        parts,
        job.options,
        dependencies,
        job.seed,
        job.protocol,
    )
    everything = decoded["all"]
    write_outputs(out, everything["trees"], everything["heads"], [t.leaves() for t in golds["all"]])
    report = _report(job, parts, golds, scored.info, scores, scored.train_minutes, start)
    if amend is not None:
        amend(report)
    (out / "report.json").write_text(to_json(report) + "\n")
    if scored.info.get("parse_curve"):
        _curve_figure(out, scored.info, report, golds, job.protocol)
    return report


def rescore_induce(
    out: str | Path,
    options: dict | None = None,
    protocol: str = DEFAULT_PROTOCOL,
    dependencies: str | None = None,
    device: str | None = None,
) -> dict:
    """Score an ``induce`` output's trained model again with other decoder settings, without training
    (``induce --rescore``): e.g. Algorithm 1's minimum layer chosen afterwards on the dev half, whose
    score per minimum layer the learning curve's last point records.

    The model (``OUT/model``), the job (model, recipe, training text, treebank, seed) and the training
    record are the run's; the decoder settings are the report's with ``options`` put over them. Like
    :func:`run_induce` it rewrites ``OUT/model/decoder.json``, ``trees.txt``, ``dependencies.conllu``,
    ``report.json`` (which adds ``rescored_from``: the decoder settings it was scored with before) and
    the curve figure; the untrained control is rebuilt from the run's seed and options.

    Args:
        out: an ``induce --out`` folder (``report.json``, ``model/`` with ``training.json``).
        options: decoder settings chosen (a dict of flags, :meth:`DecoderOptions.with_choices`).
        protocol: the constituency scoring protocol (:func:`run_induce`).
        dependencies: gold dependencies for UAS/UUAS (None: ptb-sample's with ptb-sample, else none).
        device: where to parse (None: CUDA if available).
    Returns:
        The new report.
    Raises:
        InputError: ``out`` is not an induce output folder, an unknown protocol, bad decoder options.
    """
    start = time.monotonic()
    out = Path(out)
    try:
        old = json.loads((out / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"not an induce output folder (report.json: {e})", path=out) from None
    keys = ("decoder", "data", "training", "model", "preset", "seed", "minutes")
    missing = [key for key in keys if key not in old] if isinstance(old, dict) else ["JSON object"]
    if missing:
        raise InputError(f"report.json is not an induce report (no {', '.join(missing)})", path=out)
    chosen = get_protocol(protocol)
    chosen = None if chosen.name == DEFAULT_PROTOCOL else chosen
    options = DecoderOptions.from_dict(old["decoder"]).with_choices(options)
    data, training = old["data"], old["training"]
    job = InduceRecord(
        model=old["model"],
        recipe=old["recipe"],
        treebank=data["treebank"],
        corpus=data["train"],
        seed=old["seed"],
        recipe_text=data.get("recipe_text"),
        train=training["recipe"],
        overrides=training["config"],
        options=options,
        curve=(old.get("curve") or {}).get("treebank"),
        dependencies=dependencies,
        protocol=chosen,
        note=old.get("note"),
    )
    _check_induces_structure(job.model, old["preset"], None, job.overrides or {}, options)
    golds = _load_golds(_parts(job.treebank))
    trained, tokenizer, info = load_model(out / "model", device=device)
    known = {f.name for f in fields(TrainArguments)}
    run_args = TrainArguments(**{k: v for k, v in info.get("arguments", {}).items() if k in known})
    untrained = initial_model(run_args, len(tokenizer)).to(next(trained.parameters()).device).eval()
    scored = _TrainedModel(trained, untrained, tokenizer, info, old["minutes"]["train"])

    def amend(report: dict) -> None:  # the settings scored before, and the run's minutes plus this scoring's
        report["rescored_from"] = old["decoder"]
        report["minutes"] = dict(old["minutes"], rescore=round((time.monotonic() - start) / 60, 2))

    return _score_and_write(out, job, golds, scored, start, amend)
