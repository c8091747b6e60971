"""``docs/results/nli.md``: natural-language inference on SICK: accuracy, parameters, training minutes and
inference speed per system (``nli``, the systems labelled by :data:`NLI_LABELS`) and the recipe choice
(``nli-recipe-choice``); ``docs/results/speed.md``: the systems' inference speed (``nli-speed``).

Data: ``records/nli/nli-study.json``, ``records/nli/nli-speed-2threads.json`` and ``records/recorded.json``'s
``nli_recipe_choice``.
"""

from __future__ import annotations

import statistics

from benchmarks.tools.results.core import load, markdown, mean_sd, table

NLI_LABELS = {
    "gaussian": 'Gaussian Transformer (`prior="gaussian"`)',
    "none": 'same model, `prior="none"`',
    "constituent": "same model, constituent prior",
    "mean-pool": "mean-pooled embeddings + MLP",
    "majority": "majority class (NEUTRAL)",
}


@table("nli")
def nli() -> str:
    """SICK TEST accuracy per system (selected on TRIAL), parameters, training minutes, inference speed."""
    study, speed = load("records/nli/nli-study.json"), load("records/nli/nli-speed-2threads.json")
    rows = []
    for key, label in NLI_LABELS.items():
        s = study["systems"][key]
        fast = speed["rows"].get(key)
        rows.append(
            [
                label,
                f"**{mean_sd(s['test'])}**" if len(s["test"]) > 1 else f"{s['test'][0]:.2f}",
                ", ".join(f"{v:.2f}" for v in s["test"]) if len(s["test"]) > 1 else "",
                f"{statistics.mean(s['trial']):.2f}" if s["trial"] else "",
                f"{s['parameters']:,}" + (f" ({s['trainable_parameters']:,})" if "trainable_parameters" in s else ""),
                f"{s['train_minutes'][0]:.1f} ± {s['train_minutes'][1]:.1f}" if "train_minutes" in s else "",
                f"{fast['forward_pairs_per_second']:,.0f} / {fast['end_to_end_pairs_per_second']:,.0f}" if fast else "",
            ]
        )
    return markdown(
        [
            "system (recipe `default`, frozen word2vec vectors)",
            "SICK TEST accuracy",
            "per seed",
            "TRIAL (mean of the seeds' best)",
            "parameters (trained)",
            "training min (1 thread)",
            f"inference pairs/s, forward / end to end ({speed['threads']} threads, batch {speed['batch']})",
        ],
        rows,
        "lrlrrrr",
    )


@table("nli-recipe-choice")
def nli_recipe_choice() -> str:
    rows = [
        [r["setting"], f"{r['best_trial']:.2f}", f"{r['test']:.2f}"]
        for r in load("records/recorded.json")["nli_recipe_choice"]["rows"]
    ]
    return markdown(["setting (seed 0, Gaussian Transformer, frozen vectors)", "best TRIAL", "TEST"], rows, "lrr")


@table("nli-speed")
def nli_speed() -> str:
    speed = load("records/nli/nli-speed-2threads.json")
    rows = [
        [
            NLI_LABELS[k],
            f"{r['parameters']:,}",
            f"{r['forward_pairs_per_second']:,.0f}",
            f"{r['end_to_end_pairs_per_second']:,.0f}",
            f"{r['ratio_to_none']:.2f}",
        ]
        for k, r in speed["rows"].items()
    ]
    return markdown(
        ["system", "parameters", "forward pairs/s", "end to end pairs/s", "forward, ratio to prior none"], rows, "lrrrr"
    )
