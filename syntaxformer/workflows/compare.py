"""Tree Transformer vs plain Transformer masked-LM perplexity (paper Table 4; ``syntaxformer compare``).

Trains three masked LMs on the same data, for the same number of steps, from the same seed and with the
same optimisation options (the trainer, :func:`syntaxformer.tasks.run.train`):

1. ``tree-transformer``: the Tree Transformer (constituent prior) at ``preset``;
2. ``transformer``: the same model with ``prior="none"`` (a plain Transformer, same layers);
3. ``transformer-L{n}``: the paper's control, a plain Transformer with more layers, the fewest ``n``
   whose parameter count is at least the Tree Transformer's (found from parameter counts, see
   :func:`control_layers`; the constituent prior's neighbouring-attention projections add parameters).

Then it scores each on ``test`` with the paper's protocol (every word masked in turn, one
``[MASK]`` per input; :func:`syntaxformer.evaluation.perplexity.masked_lm_perplexity`);
``OUT/compare.json`` holds everything.

With ``max_minutes`` the Tree Transformer trains for that wall time and the two Transformers then
train for exactly the steps it reached (same steps for all three, as the comparison requires). Each run
is saved in ``OUT/NAME``; running the same comparison again reuses a run whose ``training.json`` shows
it finished with the same options, and resumes one that was interrupted (its checkpoint).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch
from transformers import AutoConfig

from syntaxformer.errors import InputError
from syntaxformer.evaluation.perplexity import PROTOCOL
from syntaxformer.models import MODELS, make_config
from syntaxformer.models.tree_transformer import NAME as MODEL
from syntaxformer.models.tree_transformer import PLAIN_NAME
from syntaxformer.parsing import read_training_record
from syntaxformer.runtime import code_version
from syntaxformer.tasks.run import train
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.checkpoint import RESUMABLE_CHANGES
from syntaxformer.workflows.perplexity import evaluate_folder

logger = logging.getLogger(__name__)

COMPARE_JSON = "compare.json"
#: TrainArguments fields whose equality means a saved run can be reused: every field that shapes the
#: training (those a resume may not change), plus its length.
_REUSE_KEYS = tuple(sorted({f.name for f in fields(TrainArguments)} - RESUMABLE_CHANGES | {"max_steps", "max_minutes"}))


def count_parameters(preset: str, vocab_size: int, **overrides) -> int:
    """Parameters of ``make_config(MODEL, preset, vocab_size, **overrides)``'s model
    (built on the ``meta`` device: no memory, no initialisation cost).

    Raises:
        ValueError: an unknown preset or config field (from ``make_config``).
    """
    with torch.device("meta"):
        model = MODELS[MODEL](make_config(MODEL, preset, vocab_size, **overrides))
    return sum(p.numel() for p in model.parameters())


def control_layers(preset: str, vocab_size: int, target: int) -> int:
    """The fewest layers a plain Transformer (``prior="none"``) at ``preset`` needs to have at least
    ``target`` parameters: the paper's control for the Tree Transformer's extra parameters.

    Parameters grow linearly with the layer count, so ``n = ceil((target - P(0)) / per_layer)``
    with ``per_layer = P(2) - P(1)``; the result is checked by counting ``P(n)`` and ``P(n-1)``.
    """
    p1 = count_parameters(preset, vocab_size, prior="none", num_hidden_layers=1)
    per_layer = count_parameters(preset, vocab_size, prior="none", num_hidden_layers=2) - p1
    n = max(1, math.ceil((target - (p1 - per_layer)) / per_layer))
    assert count_parameters(preset, vocab_size, prior="none", num_hidden_layers=n) >= target
    assert n == 1 or count_parameters(preset, vocab_size, prior="none", num_hidden_layers=n - 1) < target
    return n


def _reusable(folder: Path, args) -> dict | None:
    """The ``training.json`` of a finished run in ``folder`` made with the same options, else None."""
    record = read_training_record(folder)
    if not record:
        return None
    wanted = json.loads(json.dumps(asdict(args)))  # tuples -> lists, as saved
    # an option added after the run was saved counts as its default (as a resume does)
    defaults = json.loads(json.dumps(asdict(type(args)(out=args.out))))
    saved = {**defaults, **record.get("arguments", {})}
    if any(saved.get(k) != wanted.get(k) for k in _REUSE_KEYS):
        return None
    if args.max_steps is not None and record.get("steps") != args.max_steps:
        return None
    return record


def _train(args) -> dict:
    """Train (or reuse / resume) one run; return its ``training.json`` record."""
    out = Path(args.out)
    record = _reusable(out, args)
    if record is not None:
        logger.info("%s: reusing the finished run (%d steps)", out, record["steps"])
        return {**record, "reused": True}
    train(replace(args, resume=True))
    return read_training_record(out)


def _train_all(
    base, out: Path, preset: str, max_steps: int | None, max_minutes: float | None
) -> list[tuple[str, object, dict]]:
    """Train the three runs (the Tree Transformer first: its steps and parameters fix the others');
    ``(name, TrainArguments, training record)`` each, the Tree Transformer first."""
    tree_args = replace(base, out=str(out / MODEL), prior="constituent", max_steps=max_steps, max_minutes=max_minutes)
    logger.info("training the Tree Transformer (%s)", tree_args.out)
    tree = _train(tree_args)
    steps = tree["steps"]
    vocab_size = tree["tokenizer"]["vocab_size"]
    layers = control_layers(preset, vocab_size, tree["parameters"])
    plain_args = replace(base, out=str(out / PLAIN_NAME), prior="none", max_steps=steps)
    deep_args = replace(
        base,
        out=str(out / f"{PLAIN_NAME}-L{layers}"),
        prior="none",
        max_steps=steps,
        overrides={"num_hidden_layers": layers},
    )
    logger.info(
        "training the Transformer (%s) and the %d-layer control (%s) for %d steps",
        plain_args.out,
        layers,
        deep_args.out,
        steps,
    )
    return [
        (MODEL, tree_args, tree),
        (PLAIN_NAME, plain_args, _train(plain_args)),
        (f"{PLAIN_NAME}-L{layers}", deep_args, _train(deep_args)),
    ]


def _score_run(
    name: str,
    args,
    record: dict,
    test: str,
    batch_tokens: int,
    skip_long: bool,
    device: str | None,
    seed: int,
    quiet: bool,
) -> dict:
    """One run's row of ``compare.json``: its training record and its perplexity on ``test``."""

    logger.info("scoring %s on %s", name, test)
    result = evaluate_folder(
        args.out, test, batch_tokens=batch_tokens, skip_long=skip_long, device=device, seed=seed, progress=not quiet
    )
    config = AutoConfig.from_pretrained(args.out)
    return dict(
        name=name,
        prior=record["prior"],
        layers=config.num_hidden_layers,
        hidden_size=config.hidden_size,
        parameters=record["parameters"],
        steps=record["steps"],
        train_minutes=record["minutes"],
        reused=record.get("reused", False),
        final_train_loss=record.get("final_train_loss"),
        final_valid_loss=record.get("final_valid_loss"),
        perplexity=result["perplexity"],
        cross_entropy=result["cross_entropy"],
        n_tokens=result["n_tokens"],
        n_unk=result["n_unk"],
        n_sentences=result["n_sentences"],
        n_skipped=result["n_skipped"],
        eval_minutes=result["minutes"],
        folder=args.out,
    )


def _base_arguments(
    corpus, valid, preset, seed, eval_every, threads, device, quiet, lr, warmup_steps, batch_size
) -> TrainArguments:
    """The :class:`TrainArguments` the three runs share (``out`` empty; ``lr``, ``warmup_steps`` and
    ``batch_size`` only where not None, else the trainer's defaults)."""
    options = {k: v for k, v in dict(lr=lr, warmup_steps=warmup_steps, batch_size=batch_size).items() if v is not None}
    return TrainArguments(
        out="",
        model=MODEL,
        preset=preset,
        corpus=corpus,
        valid=valid,
        seed=seed,
        eval_every=eval_every,
        threads=threads,
        device=device,
        quiet=quiet,
        **options,
    )


def _report(corpus, valid, test, preset, seed, max_steps, max_minutes, records, runs, start: float) -> dict:
    """The ``compare.json`` dict of the trained ``records`` (the Tree Transformer's first) and their scored
    ``runs``; ``minutes`` counts from ``start`` (:func:`time.perf_counter`)."""
    tree_args, steps = records[0][1], records[0][2]["steps"]
    return dict(
        data=dict(train=corpus, valid=valid or "5% of train held out by the trainer", test=test),
        protocol=PROTOCOL,
        preset=preset,
        seed=seed,
        steps=steps,
        stop=(
            f"max_steps {max_steps}"
            if max_steps is not None
            else f"max_minutes {max_minutes} (Tree Transformer), then its {steps} steps for all"
        ),
        training=dict(
            lr=tree_args.lr,
            warmup_steps=tree_args.warmup_steps,
            batch_size=tree_args.batch_size,
            schedule=tree_args.schedule,
        ),
        runs=runs,
        best=min(runs, key=lambda r: r["perplexity"])["name"],
        minutes=(time.perf_counter() - start) / 60,
        torch=torch.__version__,
        code=code_version(),
    )


def compare(
    corpus: str,
    test: str,
    out: str | Path,
    preset: str = "small",
    max_steps: int | None = None,
    max_minutes: float | None = None,
    seed: int = 0,
    valid: str | None = None,
    lr: float | None = None,
    warmup_steps: int | None = None,
    batch_size: int | None = None,
    eval_every: int = 0,
    batch_tokens: int = 4096,
    skip_long: bool = False,
    threads: int | None = None,
    device: str | None = None,
    quiet: bool = False,
) -> dict:
    """Train the three models and score them on ``test``; write and return ``OUT/compare.json``.

    Args:
        corpus, valid, test: ``load_corpus`` specs (training, validation, test).
        out: output folder; runs go to ``OUT/tree-transformer``, ``OUT/transformer``,
            ``OUT/transformer-L{n}``.
        preset: the models' size preset.
        max_steps: optimizer steps for every model; or
        max_minutes: wall time of the Tree Transformer run, whose step count the others then use.
        seed: the seed of every run (data order, masking, dropout, initialisation).
        lr, warmup_steps, batch_size: trainer options (None: the trainer's defaults), the same for all.
        eval_every: trainer validation period (0: at start and end only).
        batch_tokens, skip_long: perplexity options (see :func:`~syntaxformer.workflows.perplexity.evaluate_folder`).
        threads, device, quiet: run options.

    Returns:
        A dict: ``data`` (train/valid/test), ``protocol``, ``preset``, ``seed``, ``steps``,
        ``runs`` (one entry per model: name, prior, layers, parameters, steps, train minutes,
        perplexity, cross-entropy, words scored, ``[UNK]`` targets, eval minutes, folder),
        ``best`` (the name with the lowest perplexity) and ``minutes`` (the whole recipe).

    Raises:
        InputError: neither or both of ``max_steps`` / ``max_minutes``; bad trainer options.
    """
    if (max_steps is None) == (max_minutes is None):
        raise InputError("give exactly one of max_steps and max_minutes")
    start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = _base_arguments(
        corpus, valid, preset, seed, eval_every, threads, device, quiet, lr, warmup_steps, batch_size
    )
    records = _train_all(base, out, preset, max_steps, max_minutes)
    runs = [
        _score_run(name, args, record, test, batch_tokens, skip_long, device, seed, quiet)
        for name, args, record in records
    ]
    assert len({r["steps"] for r in runs}) == 1, [r["steps"] for r in runs]
    report = _report(corpus, valid, test, preset, seed, max_steps, max_minutes, records, runs, start)
    (out / COMPARE_JSON).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
