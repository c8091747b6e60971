"""Which part of the official constituent variant matters: a 2 x 2 ablation on ptb-sample:dev.

The authors' public code differs from the paper's equations in two ways that change the constituent
prior (DESIGN.md §1.2): the neighbour scores are divided by 256 instead of d_model / 2, and the
diagonal of C is a tiny value instead of 1 (a word barely attends to itself). At the `small` size
(6 x 256) the official variant learns far better trees than the paper's (docs/results/induce/recipes.md); this
script separates the two changes with the config fields ``constituent_scale`` (None: the variant's)
and ``constituent_diagonal``:

    =================  =========================  ============================
    setting            neighbour-score divisor    diagonal of C
    =================  =========================  ============================
    paper              d_model / 2 = 128          1
    paper-tiny-diag    128                        the public code's (3e-5 ...)
    official-unit-diag 256                        1
    official           256                        the public code's
    =================  =========================  ============================

(the official variant's 1e-9 epsilons, the only other difference, stay with the variant).

Protocol: the `small` Tree Transformer on ptb-sample's words with the default recipe's optimiser
(lr 1e-3, 300 warm-up steps, linear decay to 0.1 x over a 6,000-step schedule, batches of 64
sentences, mask rate 0.15, BERT replacement), stopped at 1,500 steps; the learning curve on
ptb-sample:dev every 500 steps (Algorithm 1 with every minimum layer, every single layer). Choices
would be made on dev; the test half is not read.

    python -m benchmarks.studies.variant_parts.variant_parts --train paper --seed 0 --threads 1   # resumable
    python -m benchmarks.studies.variant_parts.variant_parts --report                           # table + JSON

Results: ``runs/variant-parts/<setting>-seed<s>/training.json``; ``--report`` prints the markdown
table of docs/results/induce/recipes.md ("Which part of the official variant matters") and writes
``variant-parts.json`` beside this script.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks import ROOT
from benchmarks.tools.portable import portable

RUNS = ROOT / "runs" / "variant-parts"
#: the study's record, beside this script
REPORT = Path(__file__).resolve().parent / "variant-parts.json"
DEV = "ptb-sample:dev"

#: setting -> model config overrides (the diagonal named in each, the scale the variant's)
SETTINGS = {
    "paper": dict(constituent_variant="paper", constituent_diagonal="one"),
    "paper-tiny-diag": dict(constituent_variant="paper", constituent_diagonal="official"),
    "official-unit-diag": dict(constituent_variant="official", constituent_diagonal="one"),
    "official": dict(constituent_variant="official", constituent_diagonal="official"),
}
#: TrainArguments fields shared by every setting
TRAIN = dict(
    model="tree-transformer",
    preset="small",
    corpus="ptb-sample",
    min_freq=2,
    batch_size=64,
    lr=1e-3,
    warmup_steps=300,
    schedule="linear",
    final_lr_fraction=0.1,
    schedule_steps=6000,
    max_steps=1500,
    mask_rate=0.15,
    mask_replace="bert",
    eval_treebank=DEV,
    eval_every=500,
    save_every=500,
)


def train_setting(name: str, seed: int, threads: int | None) -> Path:
    """Train ``name`` (resumes its checkpoint; a finished run is trained no further)."""
    from syntaxformer.tasks.language_model import TrainArguments
    from syntaxformer.tasks.run import train

    out = RUNS / f"{name}-seed{seed}"
    args = TrainArguments(
        out=str(out), overrides=SETTINGS[name], seed=seed, threads=threads, resume=True, quiet=True, **TRAIN
    )
    train(args)
    return out


def _row(name: str, seed: int, record: dict) -> dict:
    """The table row of one finished run (its ``training.json`` record)."""
    from syntaxformer.models import make_config
    from syntaxformer.priors import ConstituentAttention

    overrides = SETTINGS[name]
    curve = record["parse_curve"]["points"]
    last = {k: v["sentence_f1"] for k, v in curve[-1]["scores"].items()}
    best = max(last, key=last.get)
    config = make_config(TRAIN["model"], TRAIN["preset"], 10, **overrides)
    divisor = ConstituentAttention.from_config(config, 0).scale  # the module's own rule
    return dict(
        setting=name,
        seed=seed,
        divisor=divisor,
        diagonal=overrides["constituent_diagonal"],
        steps=[p["step"] for p in curve],
        algorithm1_m0=[p["scores"]["algorithm1_m0"]["sentence_f1"] for p in curve],
        train_minutes=[p["train_minutes"] for p in curve],
        best_decoder=best,
        best_f1=last[best],
        valid_loss=record["final_valid_loss"],
        tokens_per_second=record["tokens_per_second"],
    )


def summarise(seeds) -> list[dict]:
    """One row per finished (setting, seed): its divisor and diagonal, dev F1 (Algorithm 1 from layer 0)
    at every curve point, the best decoder at the last point, and the validation loss."""
    rows = []
    for name in SETTINGS:
        for seed in seeds:
            path = RUNS / f"{name}-seed{seed}" / "training.json"
            record = json.loads(path.read_text()) if path.is_file() else {}
            if record.get("stopped") == "max_steps":
                rows.append(_row(name, seed, record))
    return rows


def table(rows: list[dict]) -> str:
    """The markdown table of docs/results/induce/recipes.md."""
    steps = rows[0]["steps"] if rows else []
    head = (
        "| setting | divisor | diagonal of C | seed | "
        + " | ".join(f"step {s:,}" for s in steps)
        + " | best decoder at the end | valid loss |"
    )
    lines = [head, "|" + "---|" * (6 + len(steps))]
    for r in rows:
        f1 = " | ".join(f"{v:.2f}" for v in r["algorithm1_m0"])
        diag = "1" if r["diagonal"] == "one" else "public code's"
        lines.append(
            f"| {r['setting']} | {r['divisor']:g} | {diag} | {r['seed']} | {f1} | "
            f"{r['best_decoder']}: {r['best_f1']:.2f} | {r['valid_loss']:.3f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", choices=sorted(SETTINGS), help="train this setting")
    parser.add_argument("--seed", type=int, default=0, help="the seed to train")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="the seeds to report")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--report", action="store_true", help="print the table, write the JSON")
    args = parser.parse_args(argv)
    if args.train:
        train_setting(args.train, args.seed, args.threads)
    if args.report:
        rows = summarise(args.seeds)
        REPORT.write_text(
            json.dumps(portable(dict(protocol=__doc__, train=TRAIN, settings=SETTINGS, rows=rows)), indent=1) + "\n"
        )
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
