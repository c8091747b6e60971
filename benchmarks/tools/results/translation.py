"""``docs/results/translation.md``: the translation study (every encoder structure at one schedule,
BLEU on both test sets, paired bootstrap against the baseline: ``translation-study``), the shipped
model against the anchor (``translation-shipped``) and the papers' own numbers
(``translation-papers``).

Data: ``records/translation/study.json`` (``benchmarks/studies/translation/summarise.py``),
``records/translation/shipped.json`` (the shipped model's report) and ``records/translation/papers.json``.
"""

from __future__ import annotations

from benchmarks import ROOT
from benchmarks.tools.results.core import load, markdown, table

STUDY = "records/translation/study.json"
STUDY_EN_FR = "records/translation/study-en-fr.json"
STUDY_TREES = "records/translation/study-trees.json"
SHIPPED = "records/translation/shipped.json"
PAPERS = "records/translation/papers.json"
TESTS = ("test_2016_flickr", "test_2017_flickr")


def _cell(stat: dict) -> str:
    """``mean ± sd`` of a summary ``{"mean", "sd", "values"}``; the value alone for one seed."""
    if stat["mean"] is None:
        return "–"
    return f"{stat['mean']:.2f}" if stat["sd"] is None else f"{stat['mean']:.2f} ± {stat['sd']:.2f}"


def _against(system: dict, test: str = "test_2016_flickr") -> str:
    """The difference to the baseline on ``test``: one seed's with its bootstrap p-value; over several
    seeds their mean, and in how many of them it is significant (p < 0.05) below and above the baseline."""
    rows = [r[test] for r in system.get("against_baseline", {}).values()]
    if len(rows) == 1:
        return f"{rows[0]['difference']:+.2f} (p = {rows[0]['p_value']:.3f})"
    if not rows:
        return ""
    mean = sum(r["difference"] for r in rows) / len(rows)
    below = sum(r["p_value"] < 0.05 and r["difference"] < 0 for r in rows)
    above = sum(r["p_value"] < 0.05 and r["difference"] > 0 for r in rows)
    return f"{mean:+.2f} (p < 0.05: {below} below, {above} above, of {len(rows)} seeds)"


@table("translation-study")
def translation_study() -> str:
    """Per encoder structure: BLEU on both test sets (mean ± sd over seeds), the difference to the
    baseline with its p-value, validation BLEU, parameters, training minutes and tokens/s (En→De)."""
    return _study_table(STUDY)


@table("translation-study-en-fr")
def translation_study_en_fr() -> str:
    """The same study into French (``TARGET=fr``)."""
    return _study_table(STUDY_EN_FR)


@table("translation-study-trees")
def translation_study_trees() -> str:
    """En→De, seed 0: the baseline and MG-SA with today's ensemble's syntactic phrases."""
    return _study_table(STUDY_TREES)


def _study_table(record: str) -> str:
    """The study's table from its record (:func:`translation_study`)."""
    study = load(record)
    rows = []
    for name, s in study["systems"].items():
        rows.append(
            [
                f"`{name}`",
                ", ".join(str(seed) for seed in s["seeds"]),
                f"**{_cell(s['tests']['test_2016_flickr']['bleu_tokenized'])}**",
                _cell(s["tests"]["test_2017_flickr"]["bleu_tokenized"]),
                _cell(s["tests"]["test_2016_flickr"]["sacrebleu"]),
                _against(s) or "(the baseline)",
                _cell(s["valid_bleu"]),
                f"{s['parameters']:,}",
                _cell(s["train_minutes"]),
                f"{s['train_tokens_per_second']['mean']:,.0f}",
            ]
        )
    return markdown(
        [
            "encoder",
            "seeds",
            "test 2016 BLEU",
            "test 2017 BLEU",
            "test 2016 sacreBLEU",
            "2016: difference to the baseline (p)",
            "val BLEU",
            "parameters",
            "training min",
            "target tokens/s",
        ],
        rows,
        "llrrrlrrrr",
    )


@table("translation-shipped")
def translation_shipped() -> str:
    """The shipped model's BLEU beside the anchor's published figure."""
    shipped, papers = load(SHIPPED), load(PAPERS)
    anchor = next(p for p in papers["papers"] if p["arxiv"].startswith("2105.14462"))
    row = next(r for r in anchor["rows"] if r["bleu"] is not None)
    rows = [
        [
            f"`{shipped['name']}` ({shipped['variant']}, {shipped['steps']:,} steps, {shipped['schedule']})",
            f"**{shipped['tests']['test_2016_flickr']['bleu_tokenized']['bleu']:.2f}**",
            f"{shipped['tests']['test_2017_flickr']['bleu_tokenized']['bleu']:.2f}",
            f"{shipped['tests']['test_2016_flickr']['sacrebleu']['bleu']:.2f}",
        ],
        [
            f"anchor: Wu et al. 2021, text-only `transformer_tiny` ({row['source'].split('(')[0].strip()})",
            f"{row['bleu']:.2f}",
            "–",
            "–",
        ],
    ]
    return markdown(["model", "test 2016 BLEU", "test 2017 BLEU", "test 2016 sacreBLEU"], rows, "lrrr")


#: former shipped models: one folder each, its ``shipped.json`` and the heads' records made on it
SHIPPED_HISTORY = "records/translation/history"


@table("translation-shipped-history")
def translation_shipped_history() -> str:
    """The models shipped as ``multi30k-en-de`` before today's: schedule, BLEU, and the share of all
    heads removable within 0.5 BLEU in importance order (their ``prune.json``), newest first."""
    rows = []
    for folder in sorted((ROOT / SHIPPED_HISTORY).glob("*/"), reverse=True):
        shipped = load(f"{SHIPPED_HISTORY}/{folder.name}/shipped.json")
        removable = "–"
        if (folder / "prune.json").exists():
            every_head = load(f"{SHIPPED_HISTORY}/{folder.name}/prune.json")["curves"]["all"]
            removable = f"{every_head['orders']['importance']['removable']['n_removed']} of {every_head['n_heads']}"
        tests = shipped["tests"]
        rows.append(
            [
                f"{shipped['variant']}, seed {shipped['seed']}, {shipped['steps']:,} steps: {shipped['schedule']}",
                f"{tests['test_2016_flickr']['bleu_tokenized']['bleu']:.2f}",
                f"{tests['test_2017_flickr']['bleu_tokenized']['bleu']:.2f}",
                f"{tests['test_2016_flickr']['sacrebleu']['bleu']:.2f}",
                removable,
                shipped["code"]["version"],
            ]
        )
    head = [
        "model shipped before",
        "test 2016 BLEU",
        "test 2017 BLEU",
        "test 2016 sacreBLEU",
        "heads removable",
        "package",
    ]
    return markdown(head, rows, "lrrrrl")


@table("translation-papers")
def translation_papers() -> str:
    """The papers' own numbers, with their settings (a value not read is said so, never guessed)."""
    rows = []
    for paper in load(PAPERS)["papers"]:
        for r in paper["rows"]:
            value = r.get("bleu")
            if value is None and r.get("bleu_drop") is not None:
                value = f"{r['bleu_drop']:+.2f} (difference)"
            rows.append(
                [
                    paper["paper"].split(".")[0],
                    r["system"],
                    r.get("test_set", ""),
                    "not read here" if value is None else value,
                    r.get("source", ""),
                ]
            )
    return markdown(["paper", "system", "test set", "BLEU", "where"], rows, "lllrl")


@table("readme-translation")
def readme_translation() -> str:
    """README's one line on the shipped translation model (its BLEU, the anchor's, the schedule)."""
    shipped, study = load(SHIPPED), load(STUDY)
    tests = shipped["tests"]
    systems = ", ".join(f"`{name}`" for name in study["systems"])
    return (
        f"`{shipped['name']}` scores **{tests['test_2016_flickr']['bleu_tokenized']['bleu']:.2f}** BLEU on "
        f"test_2016_flickr (tokenised, lower-cased; {tests['test_2017_flickr']['bleu_tokenized']['bleu']:.2f} on "
        f"test_2017_flickr) after {shipped['steps']:,} steps of {shipped['schedule']}; the anchor's "
        f"text-only Transformer of the same size: 41.02. The structures compared "
        f"({systems}): [translation results](docs/results/translation.md)."
    )


HEADS_PRUNE = "records/translation/prune.json"
HEADS_PRUNE_DECODER = "records/translation/decoder/prune.json"
HEADS_GATES = "records/translation/gates.json"
HEAD_SETS = {
    "all": "all 48 heads together",
    "encoder": "encoder self-attention (16)",
    "decoder_self": "decoder self-attention (16)",
    "cross": "encoder-decoder attention (16)",
}


@table("translation-heads")
def translation_heads() -> str:
    """Heads removable within 0.5 BLEU of the shipped model, importance order against random (Michel et al.)."""
    curves = {**load(HEADS_PRUNE)["curves"], **load(HEADS_PRUNE_DECODER)["curves"]}
    rows = []
    for name, label in HEAD_SETS.items():
        orders = curves[name]["orders"]
        imp, rnd = orders["importance"]["removable"], orders["random"]
        per_seed = ", ".join(str(r["n_removed"]) for r in rnd["removable_per_seed"])
        rows.append(
            [
                label,
                f"{curves[name]['full_bleu']:.2f}",
                f"**{imp['n_removed']}** ({100 * imp['fraction_removed']:.1f}%; BLEU {imp['bleu']:.2f})",
                f"{100 * rnd['removable']['fraction_removed']:.1f}% (per seed: {per_seed} heads)",
            ]
        )
    return markdown(
        [
            "heads",
            "full model BLEU",
            "importance order: removable within 0.5 BLEU",
            "random order: the mean curve (per seed), seeds 0-2",
        ],
        rows,
        "lrll",
    )


@table("translation-gates")
def translation_gates() -> str:
    """Voita et al.'s hard-concrete gates on the encoder heads: heads kept against BLEU."""
    gates = load(HEADS_GATES)
    rows = [
        [
            f"{r['gate_l0']:g}",
            f"{r['n_kept']} of {r['n_heads']} ({', '.join(map(str, r['kept_per_layer']))})",
            f"**{r['bleu']:.2f}**",
            f"{r['bleu_all_heads_open']:.2f}",
            f"{r['importance_order']['bleu']:.2f} ({r['importance_order']['n_removed']} removed)",
        ]
        for r in gates["results"]
    ]
    return markdown(
        [
            "λ (L0 weight)",
            "encoder heads kept (per layer)",
            "BLEU, closed heads removed",
            "same fine-tuned model, all heads open",
            "no fine-tuning: importance order, same heads removed",
        ],
        rows,
        "lllrr",
    )
