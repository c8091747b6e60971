"""``README.md``: the one results table of the README (``readme-results``): each shipped parser and the
ensemble on ptb-sample's test half and out of domain (UD English-EWT test), the main job and
right-branching, the papers' published figure beside the parser of their family, and the noun-phrase
recall of each (what the trees find beyond F1: right-branching finds verb phrases, not noun phrases).

Data: the induce groups of :data:`README_ROWS` (``records/induce/manifest.json``, each under its ``short``
label; a shipped parser's group is its folder's ``report.json``), their out-of-domain records
(``records/out-of-domain/shipped-NAME-ud-ewt-test.json``), the ensemble's record
(``records/ensemble/ensemble-pcfg.json``, the shipped members and weights) and the papers' rows (``records/papers/papers.json``: the first row of
each family, the paper's own figure).
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.tools.results.core import (
    RECORDS,
    ROOT,
    group,
    load,
    markdown,
    mean_sd,
    model_key,
    part_scores,
    short_label,
    table,
)

#: README's rows: (induce group, the papers' family beside it); the label is the group's ``short`` one
README_ROWS = [
    ("shipped-distilled", None),
    ("shipped-sf", "structformer"),
    ("shipped-on-lstm", "on-lstm"),
    ("shipped-cpcfg", "compound-pcfg"),
    ("shipped-lm", "tree-transformer"),
    ("shipped", None),
]
#: the main job: the ``induce`` default, one report per seed
MAIN_JOB = "tt-wikitext"
#: the shipped ensemble's record: its members and weights chosen on dev, a PCFG among the candidates
ENSEMBLE_JSON = "records/ensemble/ensemble-pcfg.json"
#: the published ensemble (Shayegh et al., ICLR 2024: seven parsers, WSJ test, mean over runs)
ENSEMBLE_PUBLISHED = "70.4 (seven parsers)"


def out_of_domain(name: str) -> dict | None:
    """The shipped parser's UD English-EWT record, or None where it has none."""
    path = RECORDS / "out-of-domain" / f"shipped-{name}-ud-ewt-test.json"
    return load(str(path.relative_to(ROOT))) if path.is_file() else None


def _ud_cell(f1: float, right: float) -> str:
    return f"{f1:.2f} ({f1 - right:+.2f})"


def _published(papers: dict, family: str | None) -> str:
    first = next((p for p in papers["rows"] if p["family"] == family), None)
    return "–".join(str(v) for v in first["sentence_f1"]) if first else "–"  # as printed in the source


@table("readme-results")
def readme_results() -> str:
    """README: the one results table (see the module docstring)."""
    papers = load("records/papers/papers.json")
    rows = []
    right = None
    for key, family in README_ROWS:
        (report,) = group(key)
        model = model_key(report)
        name = re.search(r"`([^`]+)`", short_label(key))[1]
        ud = out_of_domain(name)
        test = report["parts"]["test"]
        right = test["right_branching"]
        rows.append(
            [
                short_label(key),
                f"**{test[model]['sentence_f1']:.2f}**",
                _ud_cell(
                    ud["constituency"]["parser"]["sentence_f1"], ud["constituency"]["right_branching"]["sentence_f1"]
                )
                if ud
                else "–",
                _published(papers, family),
                f"{test[model]['label_recall']['NP']:.1f}",
            ]
        )
    ensemble = load(ENSEMBLE_JSON)
    chosen, rb = ensemble["ensemble_chosen"], ensemble["right_branching"]
    members = ", ".join(f"`{Path(m['model']).name}`" for m in ensemble["members"])
    rows.insert(
        0,
        [
            f"`ensemble-ptb-lm`: the tree {members} vote for",
            f"**{chosen['test']['sentence_f1']:.2f}**",
            _ud_cell(chosen["ud-ewt"]["sentence_f1"], rb["ud-ewt"]["sentence_f1"]),
            ENSEMBLE_PUBLISHED,
            "–",
        ],
    )
    main = group(MAIN_JOB)
    rows.append(
        [
            short_label(MAIN_JOB) + f", seeds {', '.join(str(r['seed']) for r in main)}",
            f"**{mean_sd(part_scores(main, 'test'))}**",
            "–",
            "–",
            mean_sd([recall["NP"] for recall in part_scores(main, "test", field="label_recall")], 1),
        ]
    )
    rows.append(
        [
            "right-branching trees",
            f"{right['sentence_f1']:.2f}",
            f"{rb['ud-ewt']['sentence_f1']:.2f}",
            f"{papers['right_branching']['sentence_f1']:.1f}",
            f"{right['label_recall']['NP']:.1f}",
        ]
    )
    header = [
        "parser",
        "ptb-sample test half",
        "UD English-EWT (− right-branching)",
        "published (WSJ test)",
        "noun-phrase recall",
    ]
    return markdown(header, rows, "lrrrr")
