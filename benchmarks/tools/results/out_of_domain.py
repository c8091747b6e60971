"""``docs/results/out-of-domain.md``: each shipped or long-run parser on UD English-EWT test
(``out-of-domain``) and the earlier parsers whose reports were not kept (``out-of-domain-history``).

Data: ``records/out-of-domain/*.json`` (``benchmarks/studies/out_of_domain/out_of_domain.py``) and
``records/recorded.json``'s ``out_of_domain_history``.
"""

from __future__ import annotations

from benchmarks import ROOT
from benchmarks.tools.results.core import RECORDS, load, markdown, table


@table("out-of-domain")
def out_of_domain() -> str:
    """Each shipped or long-run parser on UD English-EWT test: F1 against the gold dependency trees'
    yields beside right- and left-branching, UAS beside the chains when the parser gives heads."""
    rows = []
    for path in sorted((RECORDS / "out-of-domain").glob("*.json")):
        r = load(str(path.relative_to(ROOT)))
        c, d = r["constituency"], r.get("dependencies")
        delta = c["parser"]["sentence_f1"] - c["right_branching"]["sentence_f1"]
        rows.append(
            [
                r["parser"],
                f"{r['n_sentences']:,}",
                f"**{c['parser']['sentence_f1']:.2f}**",
                f"{c['right_branching']['sentence_f1']:.2f}",
                f"{delta:+.2f}",
                f"{c['left_branching']['sentence_f1']:.2f}",
                f"{d['parser']['uas']:.2f} (right chain {d['right_chain']['uas']:.2f})" if d else "–",
            ]
        )
    header = ["parser", "sentences", "sentence F1", "right-branching", "parser − right", "left-branching", "UAS"]
    return markdown(header, rows, "lrrrrrl")


@table("out-of-domain-history")
def out_of_domain_history() -> str:
    """Earlier parsers on UD English-EWT (``records/recorded.json``: their reports were not kept)."""
    rows = [
        [r["parser"], f"{r['minus_right_branching']:+.2f}", "–" if r["uas"] is None else f"{r['uas']:.2f}"]
        for r in load("records/recorded.json")["out_of_domain_history"]["rows"]
    ]
    return markdown(["earlier parser", "sentence F1 − right-branching", "UAS"], rows, "lrr")
