"""Inference speed of the inference models on CPU (the target: >= 2,000 pairs/s on 2 CPU cores at
batch 64).

Rows, timed in the same run, interleaved (one pass of each in turn over the pairs, ``--repeats`` rounds
after one untimed warm-up round), median per row: the Gaussian Transformer (``prior="gaussian"``), its
twins ``prior="none"`` and ``prior="constituent"``, and the mean-pool baseline -- either trained
folders (``--folders NAME=DIR ...``, e.g. the study's ``runs/nli-study/gaussian-seed0/best``) or
untrained models of the recipe's preset and vocabulary (the speed does not depend on the weights).
Pairs: SICK TEST (4,906), in batches of ``--batch`` sorted by length
(:func:`syntaxformer.workflows.nli.predict_pairs`). Two rates per row: the model forward alone
(inputs already encoded), and end to end (encoding the words and n-grams included). Ratio = the
row's forward rate / the ``none`` twin's. Not a unit test: rates depend on the machine and its load.

Usage: ``.venv/bin/python -m benchmarks.speed.nli_speed --threads 2 --batch 64 --repeats 5``
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch


def untrained_models(recipe: str, word_vectors: str | None):
    """``{name: (model, tokenizer)}``: the study's systems at the recipe's preset, untrained (seed 0)."""
    from syntaxformer.data.nli import load_nli
    from syntaxformer.models import PAIR_MODELS
    from syntaxformer.tasks.nli import build_vocabulary
    from syntaxformer.workflows.nli import RECIPES

    recipe_fields = RECIPES[recipe]
    data = load_nli("sick")
    vector_words, dim = (), None
    if word_vectors:
        from syntaxformer.data.word_vectors import read_word_vectors

        vector_words, matrix = read_word_vectors(word_vectors)
        dim = matrix.shape[1]
    tokenizer = build_vocabulary(data, 1, vector_words)
    models = {}
    for name, model, prior in (
        ("gaussian", "gaussian-transformer", "gaussian"),
        ("none", "gaussian-transformer", "none"),
        ("constituent", "gaussian-transformer", "constituent"),
        ("mean-pool", "mean-pool", None),
    ):
        entry = PAIR_MODELS[model]
        fields = dict(entry.pair_classifier.presets[recipe_fields["preset"]])
        fields.update({k: v for k, v in recipe_fields["overrides"].items() if k in entry.config_class().to_dict()})
        if prior:
            fields["prior"] = prior
        if dim:
            fields.update(word_embedding_dim=dim, freeze_word_embeddings=True)
        torch.manual_seed(0)
        models[name] = (
            entry.pair_classifier.model_class(entry.config_class(vocab_size=len(tokenizer), **fields)).eval(),
            tokenizer,
        )
    return models


def main(argv=None) -> None:
    from syntaxformer.cli import prepare_process
    from syntaxformer.data.nli import load_nli_split
    from syntaxformer.workflows.nli import load_pair_model, predict_pairs

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--recipe", default="default")
    p.add_argument(
        "--word-vectors",
        default="runs/vectors/w2v-100-seed0.kv",
        help="untrained models: the vectors' vocabulary and size ('learned': none)",
    )
    p.add_argument("--folders", nargs="*", default=[], metavar="NAME=DIR", help="trained model folders instead")
    p.add_argument("--json", default=None, help="also write the results to this file")
    args = p.parse_args(argv)
    prepare_process()
    torch.set_num_threads(args.threads)
    if args.folders:
        models = {spec.split("=", 1)[0]: load_pair_model(spec.split("=", 1)[1]) for spec in args.folders}
    else:
        models = untrained_models(args.recipe, None if args.word_vectors == "learned" else args.word_vectors)
    pairs, _ = load_nli_split("sick", "test")
    for model, tokenizer in models.values():  # warm-up round
        predict_pairs(model, tokenizer, pairs[:640], args.batch)
    rates = {name: ([], []) for name in models}
    for _ in range(args.repeats):
        for name, (model, tokenizer) in models.items():
            timing = predict_pairs(model, tokenizer, pairs, args.batch)[1]
            rates[name][0].append(timing["pairs_per_second"])
            rates[name][1].append(timing["pairs_per_second_end_to_end"])
    base = statistics.median(rates["none"][0]) if "none" in rates else None
    result = dict(
        pairs=len(pairs),
        batch=args.batch,
        threads=args.threads,
        repeats=args.repeats,
        rows={
            name: dict(
                parameters=sum(q.numel() for q in models[name][0].parameters()),
                forward_pairs_per_second=statistics.median(f),
                end_to_end_pairs_per_second=statistics.median(e),
                ratio_to_none=(statistics.median(f) / base if base else None),
            )
            for name, (f, e) in rates.items()
        },
    )
    print(f"SICK TEST, {len(pairs):,} pairs, batch {args.batch}, {args.threads} CPU threads, median of {args.repeats}")
    print(f"{'model':<12} {'parameters':>11} {'forward pairs/s':>16} {'end-to-end':>11} {'ratio to none':>14}")
    for name, row in result["rows"].items():
        ratio = f"{row['ratio_to_none']:.2f}" if row["ratio_to_none"] else "-"
        print(
            f"{name:<12} {row['parameters']:>11,} {row['forward_pairs_per_second']:>16,.0f} "
            f"{row['end_to_end_pairs_per_second']:>11,.0f} {ratio:>14}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
