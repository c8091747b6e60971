"""``README.md``: the one results table of the README (``readme-induce``): the induce groups of
:data:`README_ROWS` on ptb-sample's test half, each under its short label, the papers' published numbers
beside the parser of their family. (The README's ensemble rows, ``readme-ensemble``, are
:mod:`benchmarks.tools.results.ensemble`'s.)

Data: the groups' reports and their ``short`` labels (``records/induce/manifest.json``, read by
:func:`~benchmarks.tools.results.core.group` and :func:`~benchmarks.tools.results.core.short_label`), the
papers' rows and right-branching on WSJ test (``records/papers/papers.json``).
"""

from __future__ import annotations

from benchmarks.tools.results.core import (
    compute,
    group,
    load,
    markdown,
    mean_sd,
    part_scores,
    seeds_of,
    short_label,
    table,
)

#: README's rows: (induce group, the papers' family it sits beside); the label is the group's ``short`` one
README_ROWS = [
    ("tt-wikitext", None),
    ("tt-default", None),
    ("tt-long", None),
    ("shipped", None),
    ("tt-b256-4500", None),
    ("shipped-lm", "tree-transformer"),
    ("sf-default", None),
    ("sf-long", None),
    ("sf-small-8000", None),
    ("sf-paper-cpu", None),
    ("sf-paper-cpu-seeds", None),
    ("sf-paper-cpu-42ep", None),
    ("sf-paper-cpu-100ep", None),
    ("shipped-sf", "structformer"),
    ("on-lstm", None),
    ("on-lstm-paper-cpu", None),
    ("on-lstm-paper-cpu-longer", None),
    ("shipped-on-lstm", "on-lstm"),
]


@table("readme-induce")
def readme_induce() -> str:
    """README: the one results table: ours on ptb-sample's test half, the papers' WSJ-test numbers beside."""
    papers = load("records/papers/papers.json")
    right = f"{papers['right_branching']['sentence_f1']:.1f}"
    rows = []
    for key, family in README_ROWS:
        reps = group(key)
        seeds = f"seed {reps[0]['seed']}" if len(reps) == 1 else f"seeds {seeds_of(reps)}"
        rows.append(
            [
                short_label(key),
                f"ptb-sample test half, {seeds}",
                f"**{mean_sd(part_scores(reps, 'test'))}**",
                f"{reps[0]['parts']['test']['right_branching']['sentence_f1']:.2f}",
                compute(reps),
            ]
        )
        for paper in (p for p in papers["rows"] if p["family"] == family):
            rows.append(
                [
                    f"*published*: {paper['model']}",
                    paper["data"],
                    "–".join(str(v) for v in paper["sentence_f1"]),  # as printed in the source
                    right,
                    paper["compute"],
                ]
            )
    return markdown(["model", "sentences", "sentence F1", "right-branching", "training compute"], rows, "llrrl")
