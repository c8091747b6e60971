"""Training-step time of ON-LSTM against the Tree Transformer, interleaved on the same batches.

How the ON-LSTM ``induce`` recipes got their steps (syntaxformer/recipes/on_lstm.py): the
Tree Transformer's default recipe (``mini``, 64 sentences a step) has a measured time on an idle
2-core CPU (6,000 steps in 17.9 minutes, docs/results/induce.md), so the ratio of the two models' step times, both
measured in one run under the same load, turns a CPU-minute budget into ON-LSTM steps.

Each round takes one length bucket of ptb-sample sentences (consecutive sentences sorted by length,
as the trainer's sampler makes them), builds each model's batch with its own objective
(:mod:`syntaxformer.training.objectives`: masked LM with ``masked_only`` logits; next-word with the
``[CLS]`` frame), and times forward + backward + Adam for both models, alternating which goes first.
The first ``--warmup`` rounds are not timed. Prints tokens/s (each model's own tokens: the causal LM
has two boundary tokens per sentence) and the ratio of the median step times.

    python -m benchmarks.speed.on_lstm_step_time --preset mini --batch-size 64 --rounds 25 --threads 2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch

from syntaxformer.data.corpus import load_corpus
from syntaxformer.data.tokenization import build_word_tokenizer, encode
from syntaxformer.models import MODELS, make_config
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.objectives import build_objective

#: the compared models and their config overrides (the Tree Transformer as its default recipe)
MODELS_TIMED = {"tree-transformer": dict(constituent_variant="official"), "on-lstm": {}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="mini")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=25)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    sentences = load_corpus("ptb-sample")
    tokenizer = build_word_tokenizer(sentences, min_freq=2)
    ids = [x for x in encode(tokenizer, sentences)[0] if len(x) <= 128]
    train_args = TrainArguments(out="unused", max_steps=1, batch_size=args.batch_size)
    runs = {}
    for name, overrides in MODELS_TIMED.items():
        torch.manual_seed(args.seed)
        model = MODELS[name](make_config(name, args.preset, len(tokenizer), **overrides)).train()
        objective = build_objective(type(model), train_args, tokenizer, [0, 2, 3])
        runs[name] = dict(
            model=model,
            objective=objective,
            optimizer=torch.optim.Adam(model.parameters(), 1e-3),
            seconds=[],
            tokens=[],
        )
    rng = random.Random(args.seed)
    for round_ in range(args.rounds + args.warmup):
        start = rng.randrange(0, len(ids) - args.batch_size)
        chosen = sorted(ids[start : start + args.batch_size], key=len)
        order = list(runs) if round_ % 2 else list(runs)[::-1]
        for name in order:
            run = runs[name]
            inputs, mask, labels = run["objective"].batch(chosen, torch.Generator().manual_seed(round_))
            extra = {"masked_only": True} if run["objective"].name == "masked-lm" else {}
            t0 = time.perf_counter()
            loss = run["model"](input_ids=inputs, attention_mask=mask, labels=labels, **extra).loss
            run["optimizer"].zero_grad()
            loss.backward()
            run["optimizer"].step()
            if round_ >= args.warmup:
                run["seconds"].append(time.perf_counter() - t0)
                run["tokens"].append(int(mask.sum()))
    result = {
        name: dict(
            tokens_per_second=sum(r["tokens"]) / sum(r["seconds"]), median_step_seconds=statistics.median(r["seconds"])
        )
        for name, r in runs.items()
    }
    result["step_time_ratio"] = (
        result["on-lstm"]["median_step_seconds"] / result["tree-transformer"]["median_step_seconds"]
    )
    result.update(
        preset=args.preset, batch_size=args.batch_size, rounds=args.rounds, threads=args.threads, seed=args.seed
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for name in MODELS_TIMED:
        r = result[name]
        print(f"{name:18s} {r['tokens_per_second']:8.0f} tokens/s   median step {r['median_step_seconds']:.3f} s")
    print(
        f"ON-LSTM / Tree Transformer step time (medians, same batches, {args.preset}, batch "
        f"{args.batch_size}, {args.threads} threads): {result['step_time_ratio']:.2f}"
    )


if __name__ == "__main__":
    main()
