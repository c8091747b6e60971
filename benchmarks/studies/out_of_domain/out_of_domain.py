"""Out of domain: a parser trained on WSJ text, scored on UD English-EWT (web text: blogs, reviews,
e-mail, newsgroups, answers), beside the right- and left-branching trees.

    .venv/bin/python -m benchmarks.studies.out_of_domain.out_of_domain --model MODEL_DIR --name NAME \\
        --ud-ewt ../shared/data/ud-ewt/en_ewt-ud-test.conllu --out records/out-of-domain/NAME-ud-ewt-test.json

(no ``--model``: the shipped parser). Protocol, stated in the JSON:

* the treebank's punctuation tokens (UPOS ``PUNCT``, as :func:`syntaxformer.data.dependency.read_conllu`
  marks them) are removed before parsing, their dependents re-attached to the nearest kept ancestor
  (:func:`syntaxformer.data.trees.drop_tokens`); words are normalised as the parser does (lower case,
  a token with a digit -> ``N``); sentences of fewer than 2 words are skipped;
* **constituency**: the gold brackets are the yields of the gold dependency tree
  (:func:`syntaxformer.evaluation.dependency.subtree_brackets`: every word's contiguous yield of 2+
  words other than the whole sentence); sentence-level F1 (mean over sentences,
  :func:`~syntaxformer.evaluation.constituency.sentence_f1`) and corpus-level F1 (micro), in percent,
  for the parser's trees and the right- and left-branching trees;
* **dependencies** (a model that induces heads, e.g. StructFormer): UAS and UUAS
  (:func:`syntaxformer.evaluation.dependency.evaluate_dependency`) of its heads and of the right chain
  (each word headed by the one before) and the left chain.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

from benchmarks import ROOT
from benchmarks.tools.portable import portable
from syntaxformer import load_parser
from syntaxformer.data.dependency import DependencySentence, read_conllu
from syntaxformer.data.trees import drop_tokens
from syntaxformer.decoding.spans import brackets
from syntaxformer.evaluation.baselines import left_branching, left_chain, right_branching, right_chain
from syntaxformer.evaluation.constituency import bracket_scores
from syntaxformer.evaluation.dependency import evaluate_dependency, subtree_brackets
from syntaxformer.pretrained import model_folder
from syntaxformer.runtime import code_version

PROTOCOL = (
    "UD English-EWT; punctuation (PUNCT) removed before parsing, dependents re-attached to the nearest "
    "kept ancestor; sentences of < 2 words skipped; constituency: gold brackets = the contiguous yields "
    "(2+ words, not the whole sentence) of the gold dependency tree, sentence-level F1 (mean) and corpus "
    "F1 (micro), percent; dependencies: UAS / UUAS (micro, percent)"
)


def without_punctuation(sentences: list[DependencySentence]) -> list[DependencySentence]:
    """Each sentence of 2+ words with its punctuation removed (heads re-attached and renumbered)."""
    out = []
    for s in sentences:
        keep = [not p for p in s.punct]
        words = tuple(w for w, k in zip(s.words, keep) if k)
        if len(words) < 2:
            continue
        tags = tuple(t for t, k in zip(s.tags, keep) if k)
        out.append(DependencySentence(words, tags, tuple(drop_tokens(s.heads, keep)), (False,) * len(words)))
    return out


def constituency_scores(pred: list[set], gold: list[set], lengths: list[int]) -> dict:
    """Sentence-level (mean) and corpus-level F1 in percent, rounded to 2 places
    (:func:`syntaxformer.evaluation.constituency.bracket_scores`)."""
    return {k: round(v, 2) for k, v in bracket_scores(pred, gold, lengths).items()}


def chain_sentences(gold: list[DependencySentence], make_heads) -> list[DependencySentence]:
    return [DependencySentence(g.words, g.tags, tuple(make_heads(len(g))), g.punct) for g in gold]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model folder (default: the shipped parser)")
    p.add_argument("--name", required=True, help="the parser's name in the record")
    p.add_argument("--ud-ewt", default=str(ROOT.parent / "shared/data/ud-ewt/en_ewt-ud-test.conllu"))
    p.add_argument("--out", required=True, help="JSON record to write")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0, help="recorded (parsing is deterministic)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gold = without_punctuation(read_conllu(args.ud_ewt))
    parser = load_parser(args.model)
    start = time.monotonic()
    trees, heads, _ = parser.parse_tokens([list(g.words) for g in gold], punctuation=False)
    seconds = time.monotonic() - start
    gold_spans = [subtree_brackets(g.heads) for g in gold]
    lengths = [len(g) for g in gold]
    record = {
        "parser": args.name,
        "model": str(model_folder(args.model)),
        "data": str(Path(args.ud_ewt).resolve()),
        "n_sentences": len(gold),
        "protocol": PROTOCOL,
        "seed": args.seed,
        "parse_seconds": round(seconds, 1),
        "constituency": {
            "parser": constituency_scores([brackets(t) for t in trees], gold_spans, lengths),
            "right_branching": constituency_scores([right_branching(n) for n in lengths], gold_spans, lengths),
            "left_branching": constituency_scores([left_branching(n) for n in lengths], gold_spans, lengths),
        },
        "code": code_version(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    if heads is not None:
        pred = [DependencySentence(g.words, g.tags, tuple(h), g.punct) for g, h in zip(gold, heads)]
        record["dependencies"] = {
            name: {k: v for k, v in evaluate_dependency(sentences, gold).items() if k in ("uas", "uuas")}
            for name, sentences in (
                ("parser", pred),
                ("right_chain", chain_sentences(gold, right_chain)),
                ("left_chain", chain_sentences(gold, left_chain)),
            )
        }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    record["command"] = shlex.join(["python", "-m", __spec__.name, *(argv if argv is not None else sys.argv[1:])])
    Path(args.out).write_text(json.dumps(portable(record), indent=2) + "\n")
    json.dump(
        {k: record[k] for k in ("parser", "n_sentences", "constituency")}
        | {"dependencies": record.get("dependencies")},
        sys.stdout,
        indent=2,
    )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
