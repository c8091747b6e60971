"""Forward time of a model with attention heads pruned, against the unpruned model.

Michel et al. (2019) report +17.5% inference speed for BERT with half its heads pruned; this measures
the same ratio for a model of this package. Three rows, timed in the same run, interleaved (one
forward pass of each in turn, ``--repeats`` rounds after ``--warmup`` untimed rounds), median per row:

* ``unpruned`` -- the model as loaded (default: the parser shipped in the package);
* ``masked``   -- the same model with the removed heads' ``head_mask`` = 0 (no weight surgery: the
  heads are still computed, then multiplied by 0; for contrast);
* ``pruned``   -- the physically pruned model: ``--pruned DIR`` (a folder written by
  ``syntaxformer prune --save-at F``), or else the model with ``--fraction`` of its heads removed in
  the importance order (:mod:`syntaxformer.analysis.pruning`, one head kept per layer).

A forward pass is the masked-LM forward ``model(input_ids, attention_mask).logits`` under
``torch.inference_mode`` on one batch: the first ``--batch`` sentences of ``--text`` (default
``ptb-sample:dev``, real sentences, padded to the longest). On CUDA each pass is synchronised.
Ratio = median time / the unpruned model's median time (< 1: faster). Not a unit test: timings depend
on the machine; the ratio is measured in one run.

Usage: ``.venv/bin/python -m benchmarks.speed.pruned_speed --fraction 0.5 --batch 64 --repeats 30``
       ``.venv/bin/python -m benchmarks.speed.pruned_speed --pruned /tmp/prune-out/pruned-0.5``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from syntaxformer.cli import prepare_process


def pruned_model(model, tokenizer, info, fraction: float, seed: int):
    """``(pruned copy, removed heads)``: ``fraction`` of the heads in the importance order."""
    from syntaxformer.analysis.heads import head_layout
    from syntaxformer.analysis.pruning import (
        head_scores,
        heads_at,
        present_heads,
        pruned_copy,
        rank_heads,
        select_heads,
    )
    from syntaxformer.parsing import DecoderOptions
    from syntaxformer.workflows.prune import prepare_data

    layout = head_layout(model)
    data, _ = prepare_data(model, tokenizer, info, None, None, seed, DecoderOptions(), 32, 4096, "prune", treebank=None)
    ranked = rank_heads(head_scores(model, tokenizer, "importance", data), layout)
    removed = select_heads(ranked, layout, [], heads_at(fraction, len(present_heads(layout))))
    return pruned_copy(model, removed), removed


def batch_of(tokenizer, text: str, size: int, device):
    """The first ``size`` sentences of ``text``, encoded and padded: ``(input_ids, attention_mask)``."""
    from syntaxformer.data.batching import pad_batch
    from syntaxformer.data.corpus import load_corpus
    from syntaxformer.data.tokenization import encode

    sentences = [s for s in load_corpus(text) if s][:size]
    ids, _ = encode(tokenizer, sentences)
    input_ids, attention_mask = pad_batch(ids, tokenizer.pad_token_id)
    return input_ids.to(device), attention_mask.to(device)


def time_models(models: dict, inputs, warmup: int, repeats: int, device) -> dict[str, list[float]]:
    """Milliseconds per forward pass of each model, interleaved rounds."""
    input_ids, attention_mask = inputs
    times = {name: [] for name in models}

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    with torch.inference_mode():
        for round_ in range(warmup + repeats):
            for name, (model, kwargs) in models.items():
                sync()
                start = time.perf_counter()
                model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).logits
                sync()
                if round_ >= warmup:
                    times[name].append(1000 * (time.perf_counter() - start))
    return times


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="unpruned model folder (default: the shipped parser)")
    parser.add_argument("--pruned", default=None, help="a pruned model folder (syntaxformer prune --save-at)")
    parser.add_argument("--fraction", type=float, default=0.5, help="without --pruned: heads removed (importance)")
    parser.add_argument("--text", default="ptb-sample:dev", help="the batch's sentences (first --batch)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    prepare_process()
    if args.threads:
        torch.set_num_threads(args.threads)
    from syntaxformer.analysis.heads import head_layout
    from syntaxformer.analysis.pruning import present_heads, removal_mask
    from syntaxformer.parsing import load_model
    from syntaxformer.pretrained import pretrained_folder

    torch.manual_seed(args.seed)
    folder = args.model or pretrained_folder()
    model, tokenizer, info = load_model(folder, device=args.device)
    if args.pruned:
        pruned, _, _ = load_model(args.pruned, device=args.device)
        layout = head_layout(pruned)
        removed = [(l, h) for l in range(layout.layers) for h in range(layout.heads) if h not in layout.present[l]]
    else:
        pruned, removed = pruned_model(model, tokenizer, info, args.fraction, args.seed)
    device = next(model.parameters()).device
    mask = removal_mask(head_layout(model), removed, device=device)
    models = {"unpruned": (model, {}), "masked": (model, {"head_mask": mask}), "pruned": (pruned, {})}
    inputs = batch_of(tokenizer, args.text, args.batch, device)
    times = time_models(models, inputs, args.warmup, args.repeats, device)
    base = statistics.median(times["unpruned"])
    n_heads = len(present_heads(head_layout(model)))
    result = dict(
        model=str(folder),
        pruned=args.pruned,
        device=str(device),
        threads=torch.get_num_threads(),
        text=args.text,
        batch=list(inputs[0].shape),
        warmup=args.warmup,
        repeats=args.repeats,
        n_heads=n_heads,
        n_removed=len(removed),
        removed=sorted(removed),
        rows={
            name: dict(median_ms=statistics.median(t), min_ms=min(t), ratio=statistics.median(t) / base)
            for name, t in times.items()
        },
    )
    print(
        f"{folder}: {len(removed)} of {n_heads} heads removed; batch {inputs[0].shape[0]} x {inputs[0].shape[1]} "
        f"tokens of {args.text}; {args.device}, {result['threads']} threads; median of {args.repeats}"
    )
    print(f"{'row':<9} {'median ms':>10} {'min ms':>8} {'ratio':>6}")
    for name, row in result["rows"].items():
        print(f"{name:<9} {row['median_ms']:>10.2f} {row['min_ms']:>8.2f} {row['ratio']:>6.3f}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
