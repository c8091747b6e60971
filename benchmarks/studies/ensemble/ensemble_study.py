"""Members, their ensemble and a student on ptb-sample's dev and test halves and on UD English-EWT.

    .venv/bin/python -m benchmarks.studies.ensemble.ensemble_study --out records/ensemble/ensemble.json
    .venv/bin/python -m benchmarks.studies.ensemble.ensemble_study --student DISTILL_OUT --out ...
    .venv/bin/python -m benchmarks.studies.ensemble.ensemble_study --voters right-branching,left-branching \
        --out records/ensemble/ensemble-voters.json

Each candidate member (default: every shipped parser, each with its saved decoder settings) parses
every sentence once, one after another, on one machine in one process: its trees and its speed
(sentences per second of :meth:`~syntaxformer.parser.Parser.word_parses`, the model's forward passes
and decoding). ``--voters`` adds the baseline voters (``right-branching``, ``left-branching``:
:class:`~syntaxformer.parser.BaselineVoter`) as candidates beside the parsers, chosen like them. The
members are the subset of two or more candidates whose equal-weight ensemble has
the highest dev sentence F1 (:func:`choose_members`). The ensemble
(:class:`~syntaxformer.parser.EnsembleParser`: the minimum-Bayes-risk tree of the members' span votes,
Shayegh et al., ICLR 2024, §2.2) is scored with equal weights and with the weights chosen on the dev
half from :func:`weight_grid` (highest dev sentence F1; ties: the first in the grid, equal weights
first); its speed is the members' parse time plus the votes'.

Protocol, stated in the record: ptb-sample halves (DESIGN.md §7) preprocessed as the PRPN code does,
sentence-level F1 (mean over sentences) and corpus F1 in percent (``prpn`` protocol); UD-EWT as
:mod:`benchmarks.studies.out_of_domain.out_of_domain` scores it (punctuation removed, gold brackets =
the yields of the gold dependency tree). The setting is transductive: the shipped members were
trained on the ptb-lm text, which holds ptb-sample's sentences.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

from benchmarks import ROOT
from benchmarks.speed.parse_startup import machine
from benchmarks.studies.out_of_domain.out_of_domain import PROTOCOL as UD_PROTOCOL
from benchmarks.studies.out_of_domain.out_of_domain import without_punctuation
from benchmarks.tools.portable import portable
from syntaxformer.data.dependency import read_conllu
from syntaxformer.data.preprocess import load_gold_trees
from syntaxformer.decoding.ensemble import BASELINE_VOTERS, TIE_RULE, ensemble_spans
from syntaxformer.decoding.spans import brackets
from syntaxformer.evaluation.baselines import right_branching
from syntaxformer.evaluation.constituency import bracket_scores
from syntaxformer.evaluation.dependency import subtree_brackets
from syntaxformer.parser import BaselineVoter, load_parser
from syntaxformer.pretrained import SHIPPED
from syntaxformer.runtime import code_version

#: the members' weights tried on the dev half (each member any of these; ratios repeat, harmlessly)
WEIGHT_VALUES = (1.0, 0.5, 1.5, 2.0)
DATA_PROTOCOL = (
    "ptb-sample halves (dev: wsj_0001-0099, test: wsj_0100-0199), PRPN preprocessing, sentence-level F1 "
    "(mean over sentences) and corpus F1 (micro), percent; ud-ewt: " + UD_PROTOCOL
)


def weight_grid(k: int) -> list[tuple[float, ...]]:
    """Every combination of :data:`WEIGHT_VALUES` for ``k`` members, equal weights first."""
    return list(itertools.product(WEIGHT_VALUES, repeat=k))


def datasets(ud_ewt: Path | None) -> dict[str, tuple[list[list[str]], list[set]]]:
    """Per data set its sentences (words) and gold brackets."""
    out = {}
    for half in ("dev", "test"):
        gold = load_gold_trees(f"ptb-sample:{half}")
        out[half] = ([t.leaves() for t in gold], [brackets(t) for t in gold])
    if ud_ewt is not None and ud_ewt.is_file():
        gold = without_punctuation(read_conllu(ud_ewt))
        out["ud-ewt"] = ([list(g.words) for g in gold], [subtree_brackets(g.heads) for g in gold])
    return out


def scores(spans: list[set], gold: list[set], words: list[list[str]]) -> dict:
    """Sentence and corpus F1 (percent, 2 places) of predicted spans against gold brackets."""
    lengths = [len(w) for w in words]
    return {k: round(v, 2) for k, v in bracket_scores(spans, gold, lengths).items()}


def member_parses(name: str, data: dict, batch_size: int) -> tuple[dict, dict]:
    """A member's spans per data set, and its record (scores, speed); ``name`` a model or a baseline voter."""
    parser = BaselineVoter(name) if name in BASELINE_VOTERS else load_parser(name, batch_size=batch_size)
    options = parser.options if isinstance(parser, BaselineVoter) else parser.options.to_dict()
    spans, record = {}, {"model": name, "decoder": options}
    for key, (words, gold) in data.items():
        start = time.perf_counter()
        spans[key] = parser.word_parses(words)[0]
        seconds = time.perf_counter() - start
        record[key] = scores(spans[key], gold, words) | {"sentences_per_second": round(len(words) / seconds, 1)}
    return spans, record


def ensemble_record(member_spans: list[dict], members: list[dict], data: dict, weights) -> dict:
    """The ensemble's scores per data set with ``weights``, and its speed."""
    record = {"weights": list(weights)}
    for key, (words, gold) in data.items():
        start = time.perf_counter()
        spans = [ensemble_spans([m[key][i] for m in member_spans], len(w), weights) for i, w in enumerate(words)]
        vote_seconds = time.perf_counter() - start
        member_seconds = sum(len(words) / m[key]["sentences_per_second"] for m in members)
        record[key] = scores(spans, gold, words) | {
            "sentences_per_second": round(len(words) / (member_seconds + vote_seconds), 1)
        }
    return record


def choose_weights(member_spans: list[dict], data: dict) -> tuple[tuple[float, ...], dict]:
    """The weights of :func:`weight_grid` with the highest dev sentence F1, and every one's dev F1."""
    words, gold = data["dev"]
    tried = {}
    for weights in weight_grid(len(member_spans)):
        spans = [ensemble_spans([m["dev"][i] for m in member_spans], len(w), weights) for i, w in enumerate(words)]
        tried[weights] = scores(spans, gold, words)["sentence_f1"]
    best = max(tried.values())
    return next(w for w, f1 in tried.items() if f1 == best), tried


def student_record(folder: Path, data: dict, batch_size: int) -> dict:
    """A distilled student (a ``syntaxformer distill --out`` folder): its scores and speed as a member's,
    with how it was trained (its ``report.json``)."""
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    record = member_parses(str(folder / "model"), data, batch_size)[1]
    keep = ("setting", "sentences", "excluded_sentences", "kept_epoch", "history")
    return record | {k: report[k] for k in keep} | {"job": report["job"], "trained_by": report["code"]}


def choose_members(candidate_spans: dict[str, dict], data: dict) -> tuple[list[str], dict]:
    """The subset of two or more candidates whose equal-weight ensemble has the highest dev sentence F1
    (ties: the fewer members, then the order of the candidates), and every subset's dev F1."""
    words, gold = data["dev"]
    names, tried = list(candidate_spans), {}
    for k in range(2, len(names) + 1):
        for subset in itertools.combinations(names, k):
            spans = [
                ensemble_spans([candidate_spans[m]["dev"][i] for m in subset], len(w)) for i, w in enumerate(words)
            ]
            tried[subset] = scores(spans, gold, words)["sentence_f1"]
    best = max(tried.values())
    return list(next(subset for subset, f1 in tried.items() if f1 == best)), tried


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--candidates",
        default=",".join(SHIPPED),
        help="candidate members joined by ','; the subset with the best dev F1 is the ensemble",
    )
    p.add_argument(
        "--voters",
        default="",
        help="baseline voters joined by ',' (right-branching, left-branching) added to the candidates",
    )
    p.add_argument(
        "--student", action="append", default=[], help="a `syntaxformer distill --out` folder to score beside them"
    )
    p.add_argument("--ud-ewt", type=Path, default=ROOT.parent / "shared/data/ud-ewt/en_ewt-ud-test.conllu")
    p.add_argument("--out", required=True, help="JSON record to write")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = datasets(args.ud_ewt)
    candidates = [m for m in args.candidates.split(",") if m] + [v for v in args.voters.split(",") if v]
    parsed = {name: member_parses(name, data, args.batch_size) for name in candidates}
    names, subsets = choose_members({name: spans for name, (spans, _) in parsed.items()}, data)
    member_spans, members = zip(*(parsed[name] for name in names))
    chosen, tried = choose_weights(list(member_spans), data)
    record = {
        "data": {key: len(words) for key, (words, _) in data.items()},
        "protocol": DATA_PROTOCOL,
        "setting": "transductive: the members were trained on text that holds ptb-sample's sentences",
        "candidates": [record for _, record in parsed.values()],
        "members_tried_dev_sentence_f1": {",".join(subset): f1 for subset, f1 in subsets.items()},
        "members": list(members),
        "right_branching": {
            key: scores([right_branching(len(w)) for w in words], gold, words) for key, (words, gold) in data.items()
        },
        "ensemble_equal": ensemble_record(list(member_spans), list(members), data, (1.0,) * len(names)),
        "ensemble_chosen": ensemble_record(list(member_spans), list(members), data, chosen),
        "weights_tried_dev_sentence_f1": {",".join(map(str, w)): f1 for w, f1 in tried.items()},
        "tie_rule": TIE_RULE,
        "students": [student_record(Path(folder), data, args.batch_size) for folder in args.student],
        "device": f"CPU: {machine()['cpu']}, {args.threads} threads of {os.cpu_count()} cores",
        "code": code_version(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    record["command"] = shlex.join(["python", "-m", __spec__.name, *(argv if argv is not None else sys.argv[1:])])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(portable(record), indent=2) + "\n")
    summary = {k: record[k] for k in ("ensemble_equal", "ensemble_chosen")}
    summary["members"] = [{k: m[k] for k in ("model", "dev", "test")} for m in members]
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
