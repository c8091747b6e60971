"""Translation jobs: train (then score the averaged model on the validation pairs), score a model on a
test set, translate raw text. No argparse, no printing: each returns its report dict.

Every score report holds both BLEUs (:mod:`syntaxformer.evaluation.bleu`): BLEU-4 on the tokenised,
lower-cased references (the Multi30k literature's) and sacreBLEU with its signature on the
detokenised output against the raw references (or, without them, the tokenised references
detokenised by Moses, which the report says).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from syntaxformer.data.parallel import read_lines
from syntaxformer.errors import InputError
from syntaxformer.evaluation.bleu import detokenized_bleu, tokenized_bleu
from syntaxformer.models.translation import TranslationModel
from syntaxformer.runtime import code_version
from syntaxformer.tasks.translation import TranslationArguments, TranslationTrainer, average_snapshots, snapshot_files
from syntaxformer.tasks.translator import Translator, load_translator

#: the report a training run writes beside training.json
REPORT = "report.json"


def score_translations(translator: Translator, source: str, reference: str, raw_reference: str | None = None) -> dict:
    """Translate the tokenised ``source`` file and score it against the tokenised ``reference`` (and the
    raw references, when given).

    Returns:
        ``{"bleu_tokenized": {...}, "sacrebleu": {...}, "sentences", "seconds", "sentences_per_second",
        "translations": [tokenised lines]}``.
    Raises:
        InputError: unreadable files, or files of different lengths (naming them).
    """
    sources, references = read_lines(source), read_lines(reference)
    if len(sources) != len(references):
        raise InputError(f"{len(sources)} source lines against {len(references)} in {reference}", source)
    raw = read_lines(raw_reference) if raw_reference else None
    if raw is not None and len(raw) != len(sources):
        raise InputError(f"{len(raw)} raw references against {len(sources)} source lines", raw_reference)
    t0 = time.perf_counter()
    hypotheses = [" ".join(words) for words in translator.translate_tokens([line.split() for line in sources])]
    seconds = time.perf_counter() - t0
    detok = translator.target_text.detokenize
    detokenized = [detok(h.split()) for h in hypotheses]
    detok_references = raw if raw is not None else [detok(r.split()) for r in references]
    return dict(
        source=str(source),
        reference=str(reference),
        raw_reference=str(raw_reference) if raw_reference else "the tokenised references, detokenised by Moses",
        beam=translator.beam,
        sentences=len(sources),
        bleu_tokenized=tokenized_bleu(hypotheses, references),
        sacrebleu=detokenized_bleu(detokenized, detok_references, lowercase=translator.model.config.lowercase),
        seconds=round(seconds, 2),
        sentences_per_second=round(len(sources) / max(seconds, 1e-9), 1),
        translations=hypotheses,
    )


def run_translation_train(args: TranslationArguments, beam: int = 5) -> dict:
    """Train (:class:`~syntaxformer.tasks.translation.TranslationTrainer`), then score the model left in
    OUT (the averaged one) on the validation pairs with beam ``beam``; writes and returns
    ``OUT/report.json`` (training.json's record plus the validation BLEUs).

    Raises:
        InputError: bad options or data (before any step).
    """
    out = TranslationTrainer(args).train()
    record = json.loads((out / "training.json").read_text())
    translator = load_translator(out, device=args.device, beam=beam)
    valid = score_translations(translator, args.valid_source, args.valid_target)
    (out / "valid.hyp").write_text("\n".join(valid.pop("translations")) + "\n")
    report = dict(record, valid=valid)
    (out / REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def run_translation_average(model: str, last: int, beam: int = 5, device: str | None = None) -> dict:
    """Replace the model of a finished run folder by the average of its last ``last`` kept epoch-end
    snapshots (``OUT/snapshots/``), score it on the run's validation pairs again, and update
    ``training.json``'s and ``report.json``'s ``averaged`` and ``report.json``'s ``valid``.

    Raises:
        InputError: not a run folder with a report, ``last`` < 1, or fewer snapshots than ``last``.
    """
    folder = Path(model)
    if not (folder / REPORT).is_file():
        raise InputError(f"--model {model}: not a folder `translation train` finished (no {REPORT})")
    paths = snapshot_files(folder)
    if last < 1 or len(paths) < last:
        raise InputError(f"--last {last}: the run kept {len(paths)} snapshots")
    paths = paths[-last:]
    net = TranslationModel.from_pretrained(folder)
    net.load_state_dict(average_snapshots(paths))
    net.save_pretrained(folder, safe_serialization=True)
    averaged = dict(last=last, steps=[int(p.stem.split("-")[1]) for p in paths], chosen_after_training=True)
    training = json.loads((folder / "training.json").read_text())
    (folder / "training.json").write_text(json.dumps(dict(training, averaged=averaged), indent=2) + "\n")
    report = json.loads((folder / REPORT).read_text())
    translator = load_translator(folder, device=device, beam=beam)
    args = report["arguments"]
    valid = score_translations(translator, args["valid_source"], args["valid_target"])
    (folder / "valid.hyp").write_text("\n".join(valid.pop("translations")) + "\n")
    report = dict(report, averaged=averaged, valid=valid)
    (folder / REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def run_translation_evaluate(
    model: str,
    source: str,
    reference: str,
    raw_reference: str | None = None,
    beam: int = 5,
    device: str | None = None,
    batch_size: int = 64,
    hypotheses_out: str | None = None,
) -> dict:
    """Score a translation model (a folder or a shipped name) on one test set (:func:`score_translations`);
    with ``hypotheses_out`` the tokenised translations are written there, one a line.

    Raises:
        InputError: not a translation model; unreadable or misaligned files.
    """
    translator = load_translator(model, device=device, beam=beam, batch_size=batch_size)
    report = score_translations(translator, source, reference, raw_reference)
    lines = report.pop("translations")
    if hypotheses_out:
        Path(hypotheses_out).write_text("\n".join(lines) + "\n")
    config = translator.model.config
    return dict(
        report,
        model=str(model),
        variant=config.variant,
        parser=getattr(config, "source_parser", None),
        device=str(translator.model.device),
        code=code_version(),
    )


__all__ = [
    "REPORT",
    "score_translations",
    "run_translation_train",
    "run_translation_average",
    "run_translation_evaluate",
]
