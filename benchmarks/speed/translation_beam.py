"""Time beam-5 translation of Multi30k test_2016_flickr (1,000 sentences) with the Translator on the CPU.

What is timed: :meth:`~syntaxformer.tasks.translator.Translator.translate_tokens` over the 1,000
tokenised, lower-cased source sentences (``../shared/data/multi30k/tok/test_2016_flickr.lc.norm.tok.en``):
subword encoding, per batch of ``--batch-sizes`` sentences (sorted by length) the encoder once and
``transformers``' beam search (``generate``: 5 beams, length penalty 1, at most ``1.5 N + 10`` new
pieces, N the batch's longest source), pieces joined into words. Moses tokenisation of raw text is not
in it (the file is already tokenised), nor loading the model.

Models (``--models``):

``random``   an untrained ``anchor`` baseline (seed 0) with the joint BPE vocabulary of ``translation
             train`` learnt on the training pairs (10,000 pieces). Its time is what the body costs, but
             its output lengths are not a trained model's (an untrained model rarely ends a sentence
             before the cap, so it is near the worst case): the record gives the mean output length and
             the share of sentences stopped by the cap.
``DIR``      a trained model folder (``--trained DIR``, e.g. the shipped candidate), loaded by
             :func:`~syntaxformer.tasks.translator.load_translator`; skipped when absent.

Protocol: ``torch.set_num_threads(--threads)`` (default 1); one untimed warm-up of 64 sentences per model; then
``--repeats`` rounds, each translating the whole file once per (model, batch size) in turn; median
seconds. Per row: seconds (wall clock), the process's CPU seconds (``time.process_time``, all its threads:
on a loaded machine the wall clock includes the time other processes held the cores; with one thread the
CPU seconds are what the wall clock would be on an idle core), sentences/s, the mean output length in pieces (``</s>`` included) and in
words, the share of sentences the length cap stopped. The target: ≤ 60 s for the 1,000 sentences.

Usage::

    python -m benchmarks.speed.translation_beam --threads 1 --batch-sizes 32,64,128 \\
        --trained runs/shipped-candidate --out records/benchmarks/translation-beam.json
    # later rows into the same record (another model or threads setting):
    python -m benchmarks.speed.translation_beam --threads 2 --batch-sizes 64 --models random \\
        --merge --out records/benchmarks/translation-beam.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from syntaxformer.data.parallel import build_subwords, read_aligned, read_lines
from syntaxformer.models.translation import EOS, TranslationModel, translation_config
from syntaxformer.runtime import code_version
from syntaxformer.tasks.translation_data import wrap_subwords
from syntaxformer.tasks.translator import Translator, load_translator

MULTI30K = Path(os.environ.get("SYNTAXFORMER_SHARED_DATA", "../shared/data")) / "multi30k" / "tok"
TEST = MULTI30K / "test_2016_flickr.lc.norm.tok.en"


def random_translator(vocab_size: int, seed: int) -> Translator:
    """An untrained anchor baseline with the training pairs' joint BPE vocabulary."""
    pairs = read_aligned(MULTI30K / "train.lc.norm.tok.en", MULTI30K / "train.lc.norm.tok.de")
    tokenizer = wrap_subwords(build_subwords([side for pair in pairs for side in pair], vocab_size))
    torch.manual_seed(seed)
    model = TranslationModel(translation_config("baseline", "anchor", len(tokenizer)))
    return Translator(model, tokenizer, name="random")


class OutputLengths:
    """Wraps a model's ``generate`` to count each output's pieces and whether the cap stopped it."""

    def __init__(self, model):
        self.generate, self.pieces, self.capped = model.generate, [], []
        model.generate = self

    def __call__(self, *args, **kwargs):
        out = self.generate(*args, **kwargs)  # (B, 1 + new pieces): <s>, pieces, </s>, then </s> as padding
        body = out[:, 1:]
        ended = (body == EOS).any(1)  # (B,)
        first_end = (body == EOS).int().argmax(1)  # (B,) the first </s>
        self.pieces += torch.where(ended, first_end + 1, body.shape[1]).tolist()
        self.capped += (~ended).tolist()
        return out

    def reset(self) -> None:
        self.pieces, self.capped = [], []


def time_row(translator: Translator, lengths: OutputLengths, sentences, batch_size: int) -> dict:
    """Translate ``sentences`` once at ``batch_size``: seconds and the outputs' lengths."""
    translator.batch_size = batch_size
    lengths.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    out = translator.translate_tokens(sentences)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return dict(
        seconds=seconds,
        cpu_seconds=cpu,
        pieces=statistics.mean(lengths.pieces),
        words=statistics.mean(map(len, out)),
        capped=sum(lengths.capped) / len(lengths.capped),
    )


def load_translators(a) -> dict[str, Translator]:
    """``{name: Translator}`` of ``--models`` (a trained folder that is absent is skipped)."""
    translators = {}
    for name in a.models.split(","):
        if name == "random":
            translators["random"] = random_translator(a.vocab_size, a.seed)
        elif name == "trained" and a.trained is not None and a.trained.is_dir():
            translators[a.label or a.trained.name] = load_translator(a.trained, device="cpu", beam=a.beam)
    for translator in translators.values():
        translator.beam = a.beam
    return translators


def measure(translators: dict, sentences, sizes: list[int], repeats: int, threads: int) -> list[dict]:
    """One warm-up per model, then ``repeats`` rounds over (model, batch size): a row each."""
    torch.set_num_threads(threads)
    lengths = {name: OutputLengths(t.model) for name, t in translators.items()}
    for name, translator in translators.items():
        time_row(translator, lengths[name], sentences[:64], 64)
    runs = {(name, b): [] for name in translators for b in sizes}
    for _ in range(repeats):
        for name, b in runs:
            runs[(name, b)].append(time_row(translators[name], lengths[name], sentences, b))
            row = runs[(name, b)][-1]
            print(f"{name} batch {b}: {row['seconds']:.1f} s ({row['cpu_seconds']:.1f} CPU s)", flush=True)
    rows = []
    for (name, b), done in runs.items():
        seconds = statistics.median(r["seconds"] for r in done)
        rows.append(
            dict(
                model=name,
                variant=translators[name].model.config.variant,
                threads=threads,
                batch_size=b,
                seconds=round(seconds, 1),
                seconds_all=[round(r["seconds"], 1) for r in done],
                sentences_per_second=round(len(sentences) / seconds, 1),
                cpu_seconds=round(statistics.median(r["cpu_seconds"] for r in done), 1),
                mean_output_pieces=round(done[0]["pieces"], 2),
                mean_output_words=round(done[0]["words"], 2),
                capped_share=round(done[0]["capped"], 3),
                target_met=seconds <= 60,
                load_average=[round(x, 2) for x in os.getloadavg()],
                code=code_version(),
            )
        )
    return rows


def merged(rows: list[dict], path: Path | None) -> list[dict]:
    """``rows`` and the rows of the record at ``path`` that they do not replace (same model,
    threads and batch size)."""
    if path is None or not path.is_file():
        return rows
    new = {(r["model"], r["threads"], r["batch_size"]) for r in rows}
    kept = [r for r in json.loads(path.read_text())["rows"] if (r["model"], r["threads"], r["batch_size"]) not in new]
    return sorted(kept + rows, key=lambda r: (r["model"] != "random", r["model"], r["threads"], r["batch_size"]))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-sizes", default="32,64,128")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--models", default="random,trained", help="random and/or trained")
    parser.add_argument("--trained", type=Path, default=None, help="a trained model folder (skipped when absent)")
    parser.add_argument("--label", default=None, help="the trained model's name in the record (default: its folder's)")
    parser.add_argument("--vocab-size", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None, help="only the first this many sentences (a quick check)")
    parser.add_argument("--background", default="", help="the machine's load, for the record")
    parser.add_argument("--merge", action="store_true", help="keep --out's rows that this run does not measure")
    parser.add_argument("--out", type=Path)
    a = parser.parse_args(argv)
    sentences = [line.split() for line in read_lines(TEST)][: a.limit]
    translators = load_translators(a)
    sizes = [int(b) for b in a.batch_sizes.split(",")]
    rows = measure(translators, sentences, sizes, a.repeats, a.threads)
    report = dict(
        benchmark="translation_beam",
        data=f"Multi30k test_2016_flickr, {len(sentences)} tokenised lower-cased English sentences ({TEST.name})",
        protocol=(
            f"Translator.translate_tokens, beam {a.beam}, length penalty 1, at most 1.5 N + 10 new pieces; "
            f"one warm-up of 64 sentences per model, then {a.repeats} round(s) over (model, batch size); "
            "median s; each row names its threads, the load average at its end and the code"
        ),
        target="<= 60 s for the 1,000 sentences",
        seed=a.seed,
        device="cpu",
        cpu=platform.processor() or platform.machine(),
        cores=os.cpu_count(),
        background_load=a.background,
        torch=torch.__version__,
        python=platform.python_version(),
        rows=merged(rows, a.out if a.merge else None),
    )
    text = json.dumps(report, indent=2)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
