"""``docs/results/priors.md``: the structural-prior study: perplexity, F1 and probing per system (``priors``,
the systems labelled by :data:`PRIOR_LABELS`) and the first look at the gold-structure priors
(``priors-first-look``).

Data: ``records/priors/prior-study.json`` and ``records/priors/*-seed0-1500steps-{perplexity,training}.json``.
"""

from __future__ import annotations

from benchmarks.tools.results.core import load, markdown, table

PRIOR_LABELS = {
    "transformer": "plain Transformer",
    "constituent": "constituent (Tree Transformer)",
    "gaussian": "Gaussian",
    "structformer": "StructFormer",
    "sp-induced": "structural positions, the same-seed StructFormer's trees of the unmasked sentence",
    "sp-induced-masked": "structural positions, the same-seed StructFormer's trees of each masked input",
    "mgsa-ngram": "MG-SA, heads word, word, 2-gram, 3-gram",
    "mgsa-induced": "MG-SA, heads word, word, tree (the same-seed Tree Transformer's phrases of the unmasked "
    "sentence), 2-gram",
    "transformer-gold-block": "*gold block*: plain Transformer",
    "sp-gold": "*gold block*: structural positions, gold dependency trees",
    "mgsa-gold": "*gold block*: MG-SA, heads word, word, tree (gold phrases), 2-gram",
}
PROBING_TASKS = ("TreeDepth", "TopConst", "BShift", "SentLen")


def _stat(stat: dict | None, digits: int) -> str:
    if not stat:
        return "–"
    return f"{stat['mean']:.{digits}f}" + (f" ± {stat['sd']:.{digits}f}" if stat.get("n", 1) > 1 else "")


@table("priors")
def priors() -> str:
    """The prior study: perplexity, F1 and probing (best layer on dev; [untrained twin]) per system."""
    systems = load("records/priors/prior-study.json")["systems"]
    rows = []
    for key, label in PRIOR_LABELS.items():
        s = systems[key]
        probing = [
            f"{s['probing'][t]['best']['mean']:.1f} [{s['probing'][t]['untrained']['mean']:.1f}]"
            if t in s["probing"]
            else "–"
            for t in PROBING_TASKS
        ]
        rows.append(
            [
                label,
                ", ".join(map(str, s["seeds_trained"])),
                _stat(s["perplexity"], 1),
                _stat(s["perplexity_masked_copy"], 1),
                _stat(s["sentence_f1"], 2),
                *probing,
            ]
        )
    return markdown(
        [
            "encoder",
            "seeds",
            "perplexity",
            "perplexity, each masked copy's structure",
            "F1 (ptb-sample:test)",
            *PROBING_TASKS,
        ],
        rows,
        "llrrr" + "r" * len(PROBING_TASKS),
    )


@table("priors-first-look")
def priors_first_look() -> str:
    """One seed, 1,500 steps on ptb-sample:dev: masked-LM perplexity on ptb-sample:test."""
    rows = []
    for name, label in (
        ("transformer-gold-block", "plain Transformer"),
        ("sp-gold", "structural positions, gold dependency trees (`--trees gold`)"),
        ("mgsa-gold", "MG-SA: heads word, word, gold phrases at level 1, 2-gram (`--phrases gold`)"),
    ):
        ppl = load(f"records/priors/{name}-seed0-1500steps-perplexity.json")
        training = load(f"records/priors/{name}-seed0-1500steps-training.json")
        rows.append(
            [
                label,
                f"{ppl['perplexity']:.1f}",
                f"{training['steps']:,}",
                f"{training['minutes']:.1f}",
                f"{training['parameters']:,}",
            ]
        )
    return markdown(
        ["seed 0, ptb-sample:dev → ptb-sample:test", "perplexity", "steps", "train min (1 thread)", "parameters"],
        rows,
        "lrrrr",
    )
