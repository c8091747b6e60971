"""``syntaxformer compare``: Tree Transformer vs plain Transformer masked-LM perplexity (paper Table 4).

Trains three masked LMs on the same data, for the same number of steps, from the same seed and with the
same optimisation options (the trainer, :func:`syntaxformer.tasks.run.train`):

1. ``tree-transformer``: the Tree Transformer (constituent prior) at ``--preset``;
2. ``transformer``: the same model with ``prior="none"`` (a plain Transformer, same layers);
3. ``transformer-L{n}``: the paper's control, a plain Transformer with more layers, the fewest ``n``
   whose parameter count is at least the Tree Transformer's (found from parameter counts, see
   :func:`syntaxformer.workflows.compare.control_layers`; the constituent prior's neighbouring-attention projections add parameters).

Then it scores each on ``--test`` with the paper's protocol (every word masked in turn, one
``[MASK]`` per input; :func:`syntaxformer.evaluation.perplexity.masked_lm_perplexity`) and prints one
table (parameters, layers, steps, minutes, perplexity); ``OUT/compare.json`` holds everything.

With ``--max-minutes`` the Tree Transformer trains for that wall time and the two Transformers then
train for exactly the steps it reached (same steps for all three, as the comparison requires). Each run
is saved in ``OUT/NAME``; re-running the same command reuses a run whose ``training.json`` shows it
finished with the same options, and resumes one that was interrupted (its checkpoint). The work:
:func:`syntaxformer.workflows.compare.compare`; this module reads the arguments and prints the table.
"""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="Tree Transformer vs Transformer (same data/steps/seed) masked-LM perplexity",
        description="Train a Tree Transformer, a plain Transformer (prior none) and a plain "
        "Transformer with more layers (at least the Tree Transformer's parameters) on "
        "the same data, steps and seed; report masked-LM perplexity on a test set "
        "(one [MASK] per input, every word in turn) and parameter counts side by side.",
    )
    p.add_argument(
        "--corpus",
        required=True,
        metavar="TRAIN",
        help="training corpus: raw text file(s) (comma-separated / globs) or ptb-sample",
    )
    p.add_argument("--test", required=True, metavar="TEST", help="test corpus (same forms)")
    p.add_argument(
        "--valid", default=None, help="validation corpus for the trainer (default: it holds out 5%% of TRAIN)"
    )
    p.add_argument("--preset", default="small", help="size preset (tiny, small, paper)")
    stop = p.add_mutually_exclusive_group(required=True)
    stop.add_argument("--max-steps", type=int, help="optimizer steps, for every model")
    stop.add_argument(
        "--max-minutes",
        type=float,
        help="wall time of the Tree Transformer run; the Transformers then train for the steps it reached",
    )
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the trainer's)")
    p.add_argument("--warmup-steps", type=int, default=None, help="warm-up steps (default: the trainer's)")
    p.add_argument("--batch-size", type=int, default=None, help="sentences per batch (default: the trainer's)")
    p.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="trainer validation period in steps (0: only at start and end)",
    )
    p.add_argument("--batch-tokens", type=int, default=4096, help="tokens per perplexity forward pass")
    p.add_argument(
        "--skip-long",
        action="store_true",
        help="test sentences longer than a model accepts are left out, counted (default: error)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: PyTorch's)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument("--seed", type=int, default=0, help="seed of every run")
    p.add_argument("--out", required=True, help="output folder (one sub-folder per model)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print compare.json instead of a table")
    p.set_defaults(func=run)


def format_compare_report(report: dict) -> str:
    """The comparison as a plain-text table with a header naming data, protocol, preset and seed
    (:mod:`syntaxformer.evaluation.report`'s header and table)."""
    from syntaxformer.evaluation.report import format_header
    from syntaxformer.evaluation.report import format_table as table

    head = format_header(
        "syntaxformer compare",
        {
            "data": f"train {report['data']['train']}, valid {report['data']['valid']}, test {report['data']['test']}",
            "protocol": report["protocol"],
            "preset": report["preset"],
            "seed": report["seed"],
            "steps": f"{report['steps']:,} each ({report['stop']})",
            "training": f"lr {report['training']['lr']}, warm-up {report['training']['warmup_steps']}, "
            f"batch {report['training']['batch_size']}",
        },
    )
    rows = [
        [
            r["name"],
            r["prior"],
            r["layers"],
            r["parameters"],
            r["steps"],
            f"{r['train_minutes']:.1f}" + (" (reused)" if r["reused"] else ""),
            f"{r['eval_minutes']:.1f}",
            f"{r['cross_entropy']:.3f}",
            f"{r['perplexity']:.1f}",
        ]
        for r in report["runs"]
    ]
    body = table(
        ["model", "prior", "layers", "parameters", "steps", "train min", "eval min", "test CE", "test ppl"], rows
    )
    r0 = report["runs"][0]
    tail = (
        f"lowest test perplexity: {report['best']}; words scored {r0['n_tokens']:,} "
        f"({r0['n_unk']:,} [UNK] targets) in {r0['n_sentences']:,} sentences; "
        f"total {report['minutes']:.1f} min"
    )
    return "\n\n".join([head, body, tail])


def run(args: argparse.Namespace) -> int:
    from syntaxformer.workflows.compare import compare

    report = compare(
        args.corpus,
        args.test,
        args.out,
        preset=args.preset,
        max_steps=args.max_steps,
        max_minutes=args.max_minutes,
        seed=args.seed,
        valid=args.valid,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        batch_size=args.batch_size,
        eval_every=args.eval_every,
        batch_tokens=args.batch_tokens,
        skip_long=args.skip_long,
        threads=args.threads,
        device=args.device,
        quiet=args.quiet,
    )
    print(json.dumps(report, indent=2) if args.json else format_compare_report(report))
    return 0
