"""Ship a trained translation model inside the package: ``syntaxformer/pretrained/NAME`` in float16 with its
card, scored on both test sets as shipped; the record ``records/translation/shipped.json``.

    python -m benchmarks.studies.translation.ship --run runs/translation-study/baseline-s0 \
        --name multi30k-en-de --schedule "the study's common schedule" --data ../shared/data/multi30k
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from transformers import AutoTokenizer

from benchmarks.tools.portable import portable
from syntaxformer.data.tokenization import save_tokenizer
from syntaxformer.models.translation import TranslationModel
from syntaxformer.runtime import code_version
from syntaxformer.tasks.translator import PRETRAINED
from syntaxformer.workflows.translation import run_translation_evaluate

TESTS = ("test_2016_flickr", "test_2017_flickr")
LICENCE = (
    "Multi30k is derived from Flickr30K and provided for non-commercial research and educational use only; "
    "these weights carry the same restriction."
)


def ship(run: Path, name: str, schedule: str, data: Path) -> dict:
    """Copy ``run``'s model into the package in float16, score it there, write its card and record.

    The record's code version is read first: the package's model files this writes are tracked, so read
    after them it would call the code that scored the model modified."""
    code = code_version()
    folder = PRETRAINED / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    model = TranslationModel.from_pretrained(run).to(torch.float16)
    model.save_pretrained(folder, safe_serialization=True)
    save_tokenizer(AutoTokenizer.from_pretrained(run), folder)
    report = json.loads((run / "report.json").read_text())
    (folder / "training.json").write_text((run / "training.json").read_text())
    tests = {}
    for test in TESTS:
        scored = run_translation_evaluate(
            name,
            str(data / "tok" / f"{test}.lc.norm.tok.en"),
            str(data / "tok" / f"{test}.lc.norm.tok.de"),
            raw_reference=str(data / "raw" / f"{test}.de.gz"),
            device="cpu",
        )
        tests[test] = {k: scored[k] for k in ("bleu_tokenized", "sacrebleu", "sentences", "beam", "seconds")}
    record = dict(
        name=name,
        variant=report["variant"],
        about=report["about"],
        preset=report["preset"],
        seed=report["seed"],
        steps=report["steps"],
        schedule=schedule,
        arguments={k: report["arguments"][k] for k in ("lr", "warmup_steps", "schedule", "max_tokens", "average_last")},
        averaged_steps=report["averaged"]["steps"],
        parameters=report["parameters"],
        train_minutes=report["train_minutes_total"],
        train_tokens_per_second=report["train_tokens_per_second"],
        training_device=f"{report['device']}, {report['threads']} thread(s)",
        data=report["data"],
        valid=report["valid"],
        tests=tests,
        weights="float16 (computed in float32)",
        licence=LICENCE,
        code=code,
    )
    card = dict(
        name=name,
        task="translation, English -> German (lower-cased, Moses-tokenised Multi30k text; raw text in and out)",
        model=f"{report['variant']}: {report['about']}; preset {report['preset']}",
        data="Multi30k task 1 (Elliott et al. 2016): train 29,000 pairs, selected and averaged on val",
        schedule=schedule,
        scores={
            t: dict(bleu_tokenized=v["bleu_tokenized"]["bleu"], sacrebleu=v["sacrebleu"]["bleu"])
            for t, v in tests.items()
        },
        reproduce=portable(report["arguments"]),
        licence=LICENCE,
    )
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    return portable(record)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a folder `translation train` wrote (report.json in it)")
    parser.add_argument("--name", default="multi30k-en-de")
    parser.add_argument("--schedule", required=True, help="the schedule, in words, for the card and record")
    parser.add_argument("--data", default="../shared/data/multi30k")
    parser.add_argument("--out", default="records/translation/shipped.json")
    args = parser.parse_args(argv)
    record = ship(Path(args.run), args.name, args.schedule, Path(args.data))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({t: v["bleu_tokenized"]["bleu"] for t, v in record["tests"].items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
