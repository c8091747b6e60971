"""Ship a distilled student as a package parser: scored as ``induce`` scores a model, exported in float16, with
its card.

    python -m benchmarks.studies.ensemble.ship_student --run runs/student/stage1 \
        --name structformer-distilled-ptb-lm

The student's ``model/`` is scored by ``induce --rescore`` (:func:`syntaxformer.workflows.induce.rescore_induce`)
under the induce report of the model it started from (``--base``, the shipped StructFormer by default:
its job, protocol and decoder settings), so that its ``report.json`` has the shipped parsers' shape (every
part of ptb-sample, the untrained control, the baselines, UAS); the report's ``distilled`` section is the
``distill`` report (teacher, text, stages, epochs, dev F1 by epoch) and says that its ``training`` and
``curve`` are the starting model's. Then :func:`syntaxformer.pretrained.export_pretrained` writes
``syntaxformer/pretrained/NAME`` and the card is written beside it.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from benchmarks import ROOT
from benchmarks.tools.portable import portable
from syntaxformer.pretrained import export_pretrained, model_folder
from syntaxformer.workflows.induce import rescore_induce

LICENCE = (
    "the text states none; it is derived from LDC's Wall Street Journal text (Penn Treebank), so the weights "
    "are for non-commercial research use, like the WSJ sample"
)


def _chain(run: Path) -> list[dict]:
    """The distill reports from ``run`` back to the first stage (each stage's student is the one before's)."""
    reports = []
    while (run / "report.json").is_file():
        report = json.loads((run / "report.json").read_text(encoding="utf-8"))
        if "job" not in report or "history" not in report:
            break
        reports.insert(0, report)
        run = Path(report["job"]["student"]).parent
    return reports


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, type=Path, help="a `syntaxformer distill --out` folder")
    p.add_argument("--name", required=True, help="the shipped parser's name")
    p.add_argument("--base", default="structformer-ptb-lm", help="the model the first stage started from")
    p.add_argument("--command", required=True, help="the commands that trained it (for the card)")
    args = p.parse_args(argv)
    stages = _chain(args.run)
    scored = args.run / "induce-report"
    shutil.rmtree(scored, ignore_errors=True)
    shutil.copytree(args.run / "model", scored / "model")
    shutil.copy(model_folder(args.base) / "report.json", scored / "report.json")
    report = rescore_induce(scored)
    report["distilled"] = {
        "note": f"a student distilled from {stages[0]['job']['teacher']}: the training record and curve above "
        f"are those of the model it started from, {args.base}; the stages below are what changed it",
        "stages": [
            {k: s[k] for k in ("job", "sentences", "setting", "loss", "history", "kept_epoch", "code")} for s in stages
        ],
    }
    report = portable(report)  # the runs' folders relative to the repository
    (scored / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    folder = export_pretrained(scored, ROOT / "syntaxformer" / "pretrained" / args.name)
    minutes = sum(h["minutes"] for s in stages for h in s["history"][-1:])
    card = {
        "name": args.name,
        "model": report["model"],
        "preset": report["preset"],
        "trained_on": "the Penn Treebank language-modelling text of Mikolov et al. (ptb.train.txt, 41,931 "
        f"sentences of two or more words), parsed by {stages[0]['job']['teacher']} (its trees, never a gold "
        f"tree), starting from {args.base}",
        "licence": LICENCE,
        "setting": "transductive on ptb-sample: ptb.train.txt contains ptb-sample's sentences, and the teacher's "
        "members were trained on it",
        "command": args.command,
        "compute": f"{len(stages)} stage(s), {minutes:.1f} minutes of training on one CPU thread (the teacher's "
        "parse of the text not counted)",
        "code": report["code"],
    }
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    test = report["parts"]["test"][report["model"].replace("-", "_")]["sentence_f1"]
    dev = report["parts"]["dev"][report["model"].replace("-", "_")]["sentence_f1"]
    print(f"{args.name}: dev {dev:.2f}, test {test:.2f} -> {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
