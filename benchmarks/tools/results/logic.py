"""``docs/results/logic.md``: propositional logic: test accuracy per operator group and encoder (``logic``,
the encoders labelled by :data:`ENCODER_LABELS`) and every run of the recipe choice (``logic-recipe-choice``,
as ``benchmarks/studies/logic/logic_study.py`` prints it); ``docs/results/speed.md``: the logic encoders'
step time in float32 and bfloat16 on the CPU (``logic-precision``).

Data: ``records/logic/study.json``, ``records/logic/recipe-choice.json`` and
``records/benchmarks/logic-precision-cpu.json``.
"""

from __future__ import annotations

from benchmarks.studies.logic import logic_study
from benchmarks.tools.results.core import load, markdown, mean_sd, table

ENCODER_LABELS = {
    "on-lstm": "ON-LSTM",
    "lstm": "LSTM",
    "transformer": "Transformer (`prior none`)",
    "on-lstm-san": "ON-LSTM + self-attention",
    "tree-transformer": "Tree Transformer",
}


@table("logic")
def logic() -> str:
    """Test accuracy per operator group, mean ± sd over seeds, each encoder's recipe, and its clocks."""
    study = load("records/logic/study.json")
    rows = []
    for encoder in ("on-lstm", "lstm", "transformer", "on-lstm-san", "tree-transformer"):
        s = study["summary"][encoder]
        runs = study["runs"][encoder]
        clocks = ", ".join(
            f"{m:.1f} ({runs[str(seed)]['report']['training']['threads']})"
            for seed, m in zip(s["seeds"], s["train_minutes"])
        )
        groups = [f"{s['groups'][g]['mean']:.1f} ± {s['groups'][g]['sd']:.1f}" for g in ("1-6", "7-9", "10-12")]
        rows.append(
            [
                ENCODER_LABELS[encoder],
                f"{s['lr']:g}",
                f"{s['recipe_steps']:,}",
                s["precision"],
                ", ".join(map(str, s["seeds"])),
                *groups,
                mean_sd(s["best_valid_accuracy"], 1),
                clocks,
            ]
        )
    return markdown(
        [
            "encoder",
            "lr",
            "steps",
            "precision",
            "seeds",
            "1–6 operators",
            "7–9 operators",
            "10–12 operators",
            "best validation",
            "train min (threads), per seed",
        ],
        rows,
        "lrrllrrrrl",
    )


@table("logic-recipe-choice")
def logic_recipe_choice() -> str:
    """Every run of the recipe choice (validation accuracy against steps), as logic_study prints it."""
    recorded = load("records/logic/recipe-choice.json")["runs"]
    rows = [
        dict(
            r,
            valid_curve={int(k): v for k, v in r["valid_curve"].items()},
            precision=r.get("precision") or "fp32",
            final_lr_fraction=r.get("final_lr_fraction", logic_study.RECORDED_FINAL_LR_FRACTION),
        )
        for r in recorded
    ]
    return logic_study.recipe_choice_table(rows)


@table("logic-precision")
def logic_precision() -> str:
    report = load("records/benchmarks/logic-precision-cpu.json")
    rows = [
        [
            r["encoder"],
            r["threads"],
            r["steps"],
            f"{r['seconds_per_step']['fp32']:.3f}",
            f"{r['seconds_per_step']['bf16']:.3f}",
            f"×{r['speedup']:.2f}",
            f"{r['first_step_loss']['fp32']:.5f} / {r['first_step_loss']['bf16']:.5f}",
        ]
        for r in report["results"]
    ]
    return markdown(
        ["encoder", "threads", "steps each", "fp32 s/step", "bf16 s/step", "speed-up", "first-step loss fp32 / bf16"],
        rows,
        "lrrrrrr",
    )
