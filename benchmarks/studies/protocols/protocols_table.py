"""Which number is which: the same trees under every constituency protocol (``docs/reference/protocols.md``).

    .venv/bin/syntaxformer parse --model tree-transformer-ptb --treebank ptb-sample:test --out /tmp/proto-parse --min-layer 0
    .venv/bin/python -m benchmarks.studies.protocols.protocols_table --pred /tmp/proto-parse/trees.txt
    .venv/bin/python -m benchmarks.studies.protocols.protocols_table --render-only      # the page from the JSON

Scores a shipped parser's test-half trees (``tree-transformer-ptb``, the small pretrained Tree Transformer,
Algorithm 1 from layer 0) and the right- and left-branching trees under every protocol of
:data:`syntaxformer.evaluation.protocols.PROTOCOLS` (``syntaxformer evaluate --all-protocols``), plus
two option variants (``cpcfg`` with the gold's unary chains read collapsed; ``evalb`` with URNNG's
``CUTOFF_LEN 10``), and writes ``records/protocols/protocols.json``. Then it writes the tables of
``docs/reference/protocols.md`` between its ``<!-- protocols:NAME -->`` / ``<!-- /protocols:NAME -->`` markers
from that JSON only (the prose around them is the page's own).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from benchmarks import ROOT

PARSE_COMMAND = (
    ".venv/bin/syntaxformer parse --model tree-transformer-ptb --treebank ptb-sample:test --out /tmp/proto-parse "
    "--min-layer 0"
)
TREES = {"right_branching": "right-branching", "prediction": "shipped parser", "left_branching": "left-branching"}


def commit() -> str:
    """The code's commit (short hash, ``+dirty`` when the scoring code — tree readers, spans,
    evaluation, the evaluate workflow — has uncommitted changes), or ``unknown``."""
    scoring = [
        "syntaxformer/data/treebank.py",
        "syntaxformer/data/preprocess.py",
        "syntaxformer/decoding/spans.py",
        "syntaxformer/evaluation/constituency.py",
        "syntaxformer/evaluation/protocols.py",
        "syntaxformer/evaluation/baselines.py",
        "syntaxformer/workflows/evaluate.py",
    ]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", *scoring], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def variants(pred: str, gold: str) -> dict:
    """Option variants of two protocols on the same trees: ``cpcfg`` with the gold read collapsed
    (``kim_gold=False``) and ``evalb`` with URNNG's cut of 10 words; plus the root-chain count."""
    from syntaxformer.data import load_gold_trees, read_treebank
    from syntaxformer.evaluation.baselines import right_branching
    from syntaxformer.evaluation.protocols import (
        CpcfgProtocol,
        EvalbProtocol,
        constituents_from_spans,
        tree_constituents,
    )

    gold_trees = load_gold_trees(gold)
    gold_read = [tree_constituents(t) for t in gold_trees]
    trees = {
        "prediction": [tree_constituents(t) for t in read_treebank(pred)],
        "right_branching": [constituents_from_spans(r.n_words, right_branching(r.n_words)) for r in gold_read],
    }
    out = {}
    for key, protocol, what in (
        (
            "cpcfg (kim_gold=False)",
            CpcfgProtocol(kim_gold=False),
            "cpcfg with the gold's unary chains read collapsed (PRPN's data_ptb.py gold)",
        ),
        ("evalb (cutoff_len=10)", EvalbProtocol(cutoff_len=10), "evalb with URNNG's COLLINS.prm cut, 10 words"),
    ):
        out[key] = {
            "what": what,
            "scores": {k: protocol.score_constituents(v, gold_read, gold_trees) for k, v in trees.items()},
        }
    chains = sum("+" in t.label() and len(t.leaves()) > 1 for t in gold_trees)
    return {"variants": out, "gold_root_chains": chains}


def measure(pred: str, gold: str, seed: int) -> dict:
    """The report: ``evaluate --all-protocols``' dict, the variants, and what produced them."""
    from syntaxformer.workflows.evaluate import evaluate_predictions

    result = evaluate_predictions(pred, gold, seed=seed, all_protocols=True)
    return {
        "description": "the same trees under every constituency protocol (docs/reference/protocols.md)",
        "data": gold,
        "pred_command": PARSE_COMMAND,
        "code": commit(),
        **result,
        **variants(pred, gold),
    }


def cell(scores: dict, key: str) -> str:
    value = scores.get(key)
    return "–" if value is None else f"{value:.2f}"


def pair(scores: dict) -> str:
    """``sentence / corpus`` F1 (``–`` where the protocol has no sentence F1)."""
    return f"{cell(scores, 'sentence_f1')} / {cell(scores, 'corpus_f1')}"


def overview_table(report: dict) -> str:
    """One row per protocol: source, rules, papers, right-branching and the shipped parser."""
    lines = [
        (
            "| protocol | source | rules | used by | right-branching sent. / corpus F1 "
            "| shipped parser sent. / corpus F1 |"
        ),
        "|---|---|---|---|--:|--:|",
    ]
    for name, entry in report["protocols"].items():
        s = entry["scores"]
        lines.append(
            f"| `{name}` | {entry['source']} | {entry['rules']} | {entry['papers']} "
            f"| {pair(s['right_branching'])} | {pair(s['prediction'])} |"
        )
    return "\n".join(lines)


def detail_table(report: dict) -> str:
    """Every protocol x tree set: sentence F1, corpus F1 / P / R, sentences scored and averaged."""
    lines = [
        (
            "| protocol | trees | sentence F1 | corpus F1 | corpus P | corpus R | matched / pred / gold "
            "| sentences scored (sentence F1 over) |"
        ),
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for name, entry in report["protocols"].items():
        for key, title in TREES.items():
            s = entry["scores"][key]
            over = s.get("n_sentence_f1")
            lines.append(
                f"| `{name}` | {title} | {cell(s, 'sentence_f1')} | {cell(s, 'corpus_f1')} "
                f"| {cell(s, 'corpus_precision')} | {cell(s, 'corpus_recall')} "
                f"| {s['matched']:,} / {s['pred_brackets']:,} / {s['gold_brackets']:,} "
                f"| {s['n_scored']:,}" + (f" ({over:,})" if over is not None else "") + " |"
            )
    return "\n".join(lines)


def cuts_table(report: dict) -> str:
    """The protocols' own subsets: prpn's WSJ-10, evalb's len <= 40 and URNNG's len <= 10."""
    lines = ["| protocol | subset | trees | sentence F1 | corpus F1 | sentences |", "|---|---|---|--:|--:|--:|"]
    prpn, evalb = report["protocols"]["prpn"]["scores"], report["protocols"]["evalb"]["scores"]
    urnng = report["variants"]["evalb (cutoff_len=10)"]["scores"]
    for key in ("right_branching", "prediction"):
        s = prpn[key]
        lines.append(
            f"| `prpn` | WSJ-10 (<= 10 words) | {TREES[key]} | {s['wsj10_sentence_f1']:.2f} "
            f"| {s['wsj10_corpus_f1']:.2f} | {s['n_wsj10']:,} |"
        )
    for scores, label in ((evalb, "`evalb`"), (urnng, "`evalb`, URNNG's CUTOFF_LEN")):
        for key in ("right_branching", "prediction"):
            s = scores[key]
            lines.append(
                f"| {label} | len <= {s['cutoff_len']} | {TREES[key]} | – | {s['cutoff_corpus_f1']:.2f} "
                f"| {s['n_cutoff']:,} |"
            )
    return "\n".join(lines)


def variants_table(report: dict) -> str:
    """The ``kim_gold`` option of cpcfg beside the registered cpcfg."""
    lines = ["| protocol | trees | sentence F1 | corpus F1 | corpus R | gold spans |", "|---|---|--:|--:|--:|--:|"]
    rows = [
        ("`cpcfg` (Kim's gold: root chains kept)", report["protocols"]["cpcfg"]["scores"]),
        ("`cpcfg`, kim_gold=False (chains collapsed)", report["variants"]["cpcfg (kim_gold=False)"]["scores"]),
    ]
    for label, scores in rows:
        for key in ("right_branching", "prediction"):
            s = scores[key]
            lines.append(
                f"| {label} | {TREES[key]} | {cell(s, 'sentence_f1')} | {cell(s, 'corpus_f1')} "
                f"| {cell(s, 'corpus_recall')} | {s['gold_brackets']:,} |"
            )
    return "\n".join(lines)


def facts(report: dict) -> str:
    """The data line under the tables."""
    return (
        f"Data: `{report['data']}` ({report['n_sentences']:,} sentences; {report['gold_root_chains']} "
        f"gold trees have a unary chain at the root). Prediction: `{report['pred_command']}`. "
        f"Seed {report['seed']}; `evaluate --all-protocols` took {report['seconds']:.1f} s. Source: "
        "`records/protocols/protocols.json` (its `code` names the commit that scored)."
    )


TABLES = {
    "overview": overview_table,
    "detail": detail_table,
    "cuts": cuts_table,
    "variants": variants_table,
    "facts": facts,
}


def render(report: dict, page: Path) -> None:
    """Replace every ``<!-- protocols:NAME -->`` ... ``<!-- /protocols:NAME -->`` block of ``page``."""
    text = page.read_text()
    for name, make in TABLES.items():
        pattern = re.compile(rf"(<!-- protocols:{name} -->\n).*?(<!-- /protocols:{name} -->)", re.DOTALL)
        if not pattern.search(text):
            raise SystemExit(f"{page}: no <!-- protocols:{name} --> ... <!-- /protocols:{name} --> block")
        table = make(report)
        text = pattern.sub(lambda m, table=table: m.group(1) + table + "\n" + m.group(2), text)
    page.write_text(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pred", default="/tmp/proto-parse/trees.txt", help=f"trees of: {PARSE_COMMAND}")
    parser.add_argument("--gold", default="ptb-sample:test")
    parser.add_argument("--json", default=str(ROOT / "records/protocols/protocols.json"))
    parser.add_argument("--page", default=str(ROOT / "docs/reference/protocols.md"))
    parser.add_argument("--render-only", action="store_true", help="rewrite the page's tables from --json")
    parser.add_argument("--seed", type=int, default=0, help="recorded (evaluation is deterministic)")
    args = parser.parse_args(argv)
    if not args.render_only:
        report = measure(args.pred, args.gold, args.seed)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        from syntaxformer.evaluation.report import to_json

        Path(args.json).write_text(to_json(report) + "\n")
    render(json.loads(Path(args.json).read_text()), Path(args.page))
    return 0


if __name__ == "__main__":
    sys.exit(main())
