"""Natural-language inference jobs (``syntaxformer nli``; DESIGN.md §3.1, §6): train a sentence-pair
classifier and score it, or score a saved one.

* :func:`run_nli_train` -- read the pairs, train with :class:`~syntaxformer.tasks.nli.NliTrainer`
  by a recipe (:data:`RECIPES`: epochs, not minutes), select the model on the selection split
  (SICK TRIAL), score it on the report split (SICK TEST) beside the majority class, measure
  inference pairs/s; ``OUT/report.json``.
* :func:`run_nli_evaluate` -- score a model folder on one split.
* :func:`predict_pairs` -- predictions and timings of a model on pairs.

Reports: accuracy, per-class precision and recall, confusion matrix (rows gold, columns predicted),
parameters, training and inference pairs/s; data, protocol, recipe, preset and seed.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from syntaxformer.data.nli import LABELS, NliPair, PairEncoder, load_nli, load_nli_split
from syntaxformer.errors import InputError
from syntaxformer.evaluation.classification import classification_scores, majority_class_scores
from syntaxformer.models import PAIR_MODELS, default_architecture
from syntaxformer.runtime import prepare_cpu_loop, resolve_device
from syntaxformer.tasks.nli import NliTrainArguments, NliTrainer, steps_for_epochs
from syntaxformer.training.best import BEST

logger = logging.getLogger(__name__)

#: the selection / report protocol, named in every report
PROTOCOL = (
    "3-way accuracy; the model of the best selection accuracy over the evaluations (every epoch "
    "end; earliest on ties) is scored on the report split (SICK: select on TRIAL, report TEST)"
)

#: training recipes (NliTrainArguments fields; ``epochs`` becomes max_steps = epochs × batches per epoch).
#: ``default``: the study's one recipe for every system (docs/results/nli/study.md); ``overrides`` apply to the
#: config fields a model has (the mean-pool baseline has no attention nor classifier_features)
RECIPES = {
    "default": dict(
        preset="small",
        epochs=36,
        batch_size=32,
        lr=1e-3,
        betas=(0.9, 0.98),
        eps=1e-9,
        warmup_steps=50,
        schedule="linear",
        final_lr_fraction=0.05,
        clip=5.0,
        eval_every=0,
        save_every=0,
        overrides=dict(
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0, classifier_features="match", residual_init="zero"
        ),
    ),
    # tests and smoke runs: one epoch of the tiny preset
    "tiny": dict(
        preset="tiny",
        epochs=1,
        batch_size=32,
        lr=1e-3,
        warmup_steps=10,
        schedule="linear",
        final_lr_fraction=0.1,
        clip=1.0,
        eval_every=0,
        save_every=0,
        overrides={},
    ),
}

REPORT_JSON = "report.json"


def resolve_nli_recipe(recipe: str, n_train: int, model: str | None = None, **changes) -> dict:
    """NliTrainArguments fields of ``recipe`` for ``model`` with ``changes`` applied (None values
    ignored; an ``overrides`` dict is merged into the recipe's, whose fields the model's config lacks
    are dropped); ``max_steps`` = epochs × batches per epoch unless given.

    Raises:
        InputError: an unknown recipe or model.
    """
    model = model or default_architecture("pair_classifier")
    if recipe not in RECIPES:
        raise InputError(f"unknown recipe {recipe!r}; expected one of {', '.join(RECIPES)}")
    if model not in PAIR_MODELS:
        raise InputError(f"--architecture {model}: expected one of {', '.join(PAIR_MODELS)}")
    known = set(PAIR_MODELS[model].config_class().to_dict())
    fields = {k: (dict(v) if isinstance(v, dict) else v) for k, v in RECIPES[recipe].items()}
    overrides = changes.pop("overrides", None) or {}
    fields.update({k: v for k, v in changes.items() if v is not None})
    fields["overrides"] = {**{k: v for k, v in fields.get("overrides", {}).items() if k in known}, **overrides}
    if fields.get("max_steps") is None and fields.get("epochs") is not None:
        fields["max_steps"] = steps_for_epochs(n_train, fields["batch_size"], fields["epochs"])
    return fields


def predict_pairs(
    model, tokenizer, pairs: list[NliPair], batch_size: int = 64, device: torch.device | str = "cpu"
) -> tuple[list[int], dict]:
    """Predicted class ids of ``pairs`` (in order) and the timing.

    Pairs are batched in order of length (less padding), ``batch_size`` per batch; one warm-up batch
    runs first and is not timed.

    Returns:
        ``(predictions, timing)``: timing = ``{"pairs", "batch_size", "forward_seconds",
        "total_seconds", "pairs_per_second"`` (model forward only, inputs already encoded),
        ``"pairs_per_second_end_to_end"`` (encoding included)``}``.
    """
    model.eval()
    encoder = PairEncoder(tokenizer, model.config)
    order = sorted(range(len(pairs)), key=lambda i: max(len(pairs[i].premise), len(pairs[i].hypothesis)))
    predictions = [0] * len(pairs)
    forward = total = 0.0
    with torch.no_grad():
        warm = encoder.batch([pairs[i] for i in order[:batch_size]])
        model(**{k: v.to(device) for k, v in warm.items() if k != "labels"})
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            t0 = time.perf_counter()
            inputs = {k: v.to(device) for k, v in encoder.batch([pairs[i] for i in idx]).items() if k != "labels"}
            t1 = time.perf_counter()
            logits = model(**inputs).logits
            predicted = logits.argmax(-1).tolist()
            t2 = time.perf_counter()
            forward += t2 - t1
            total += t2 - t0
            for i, p in zip(idx, predicted):
                predictions[i] = p
    timing = dict(
        pairs=len(pairs),
        batch_size=batch_size,
        forward_seconds=round(forward, 4),
        total_seconds=round(total, 4),
        pairs_per_second=round(len(pairs) / max(forward, 1e-9), 1),
        pairs_per_second_end_to_end=round(len(pairs) / max(total, 1e-9), 1),
    )
    return predictions, timing


def load_pair_model(folder: str | Path, device: torch.device | str = "cpu"):
    """``(model, tokenizer)`` of a folder ``nli train`` wrote (``OUT`` or ``OUT/best``).

    Raises:
        InputError: not a folder with a sentence-pair classifier and its tokenizer.
    """
    folder = Path(folder)
    if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
        raise InputError("not a model folder (config.json and tokenizer.json expected)", path=folder)
    config = AutoConfig.from_pretrained(folder)
    if config.model_type not in {arch.config_class.model_type for arch in PAIR_MODELS.values()}:
        raise InputError(f"a {config.model_type} model is not a sentence-pair classifier", path=folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).to(device).eval()
    return model, AutoTokenizer.from_pretrained(folder)


def score_split(model, tokenizer, pairs: list[NliPair], batch_size: int, device) -> dict:
    """Scores (:func:`~syntaxformer.evaluation.classification.classification_scores`) and timing of a
    model on ``pairs``, with the number of their words outside the vocabulary."""
    predictions, timing = predict_pairs(model, tokenizer, pairs, batch_size, device)
    words = [w for p in pairs for w in p.premise + p.hypothesis]
    unknown = PairEncoder(tokenizer, model.config).unknown(words)
    return dict(
        classification_scores([p.label for p in pairs], predictions, LABELS),
        inference=timing,
        words=len(words),
        unknown_words=unknown,
    )


def run_nli_train(
    out: str | Path,
    data: str = "sick",
    model: str | None = None,
    recipe: str = "default",
    seed: int = 0,
    valid: str | None = None,
    test: str | None = None,
    eval_batch_size: int = 64,
    **changes,
) -> dict:
    """Train a sentence-pair classifier, select it, score it (module docstring).

    Args:
        out: the run's folder (model, ``best/``, ``checkpoint.pt``, ``training.json``, ``report.json``).
        data, valid, test: :func:`~syntaxformer.data.nli.load_nli`'s arguments.
        model: a name in :data:`syntaxformer.models.PAIR_MODELS` (None: the registry's default pair classifier).
        recipe: a name in :data:`RECIPES`.
        seed: every random choice derives from it.
        eval_batch_size: pairs per batch when scoring (and timing inference).
        **changes: NliTrainArguments fields replacing the recipe's (None = the recipe's), e.g.
            ``prior``, ``word_vectors``, ``max_minutes``, ``resume``, ``threads``, ``device``,
            ``epochs``, ``overrides``, ``bf16``.
    Returns:
        The report (also ``OUT/report.json``).
    Raises:
        InputError: bad data, options or checkpoint.
    """
    model = model or default_architecture("pair_classifier")
    pairs = load_nli(data, valid, test)
    fields = resolve_nli_recipe(recipe, len(pairs.train), model, **changes)
    try:
        args = NliTrainArguments(
            out=str(out), model=model, data=data, valid_file=valid, test_file=test, seed=seed, **fields
        )
    except TypeError as e:
        raise InputError(f"bad option: {e}") from None
    trainer = NliTrainer(args, data=pairs)
    trainer.train()
    training = json.loads((Path(out) / "training.json").read_text())
    best, tokenizer = load_pair_model(Path(out) / BEST, trainer.device)
    scores = {"valid": score_split(best, tokenizer, pairs.valid, eval_batch_size, trainer.device)}
    if pairs.test:
        scores["test"] = score_split(best, tokenizer, pairs.test, eval_batch_size, trainer.device)
        scores["majority_test"] = majority_class_scores(
            [p.label for p in pairs.train], [p.label for p in pairs.test], LABELS
        )
    report = dict(
        command="nli train",
        data=pairs.record(),
        protocol=PROTOCOL,
        recipe=recipe,
        model=model,
        preset=args.preset,
        prior=training["prior"],
        seed=seed,
        word_vectors=training["word_vectors"],
        parameters=training["parameters"],
        trainable_parameters=training["trainable_parameters"],
        steps=training["steps"],
        epochs=training["epochs"],
        stopped=training["stopped"],
        train_minutes=training["train_minutes_total"],
        train_pairs_per_second=training["train_pairs_per_second"],
        selected_step=training["selection"]["best_step"],
        selection=training["selection"]["history"],
        threads=training["threads"],
        device=training["device"],
        torch=training["torch"],
        code=training["code"],
        scores=scores,
        out=str(out),
    )
    (Path(out) / REPORT_JSON).write_text(json.dumps(report, indent=2) + "\n")
    return report


def run_nli_evaluate(
    model: str | Path,
    data: str = "sick",
    split: str = "test",
    batch_size: int = 64,
    seed: int = 0,
    threads: int | None = None,
    device: str | None = None,
) -> dict:
    """Score a model folder on one split (SICK ``train`` / ``trial`` / ``test``, or ``all`` pairs of a
    generic file).

    Raises:
        InputError: a bad folder, file or split.
    """
    if threads:
        torch.set_num_threads(threads)
    resolved = resolve_device(device)
    prepare_cpu_loop(resolved)
    torch.manual_seed(seed)
    pairs, description = load_nli_split(data, split)
    net, tokenizer = load_pair_model(model, resolved)
    config = net.config
    return dict(
        command="nli evaluate",
        model=str(model),
        model_type=config.model_type,
        prior=getattr(config, "prior", None),
        data=description,
        protocol="3-way accuracy",
        seed=seed,
        parameters=sum(p.numel() for p in net.parameters()),
        threads=torch.get_num_threads(),
        device=str(resolved),
        scores=score_split(net, tokenizer, pairs, batch_size, resolved),
    )


__all__ = [
    "RECIPES",
    "PROTOCOL",
    "resolve_nli_recipe",
    "predict_pairs",
    "load_pair_model",
    "score_split",
    "run_nli_train",
    "run_nli_evaluate",
]
