"""Collect the translation study's runs into one record: ``records/translation/study.json``.

For every run folder ``RUNS/<variant>-s<seed>`` that ``run_study.sh`` finished (``report.json`` and the
test sets' ``<test>.json`` / ``<test>.hyp``): the validation and test BLEUs, training minutes and target
tokens/s; per variant the mean ± sample sd over its seeds; per variant and seed the paired bootstrap
p-value (``sacrebleu``, 1,000 resamples) of its test translations against the baseline's of the same
seed. Runs still missing are listed, not guessed. The target language (and so the references) is the
runs' own (their reports' target file); runs of different target languages are refused.

    python -m benchmarks.studies.translation.summarise --runs runs/translation-study \
        --data ../shared/data/multi30k --out records/translation/study.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from syntaxformer.evaluation.bleu import paired_bootstrap
from syntaxformer.models.translation import VARIANTS
from syntaxformer.runtime import code_version

TESTS = ("test_2016_flickr", "test_2017_flickr")


def _mean_sd(values: list[float]) -> dict:
    return dict(
        mean=round(statistics.mean(values), 2) if values else None,
        sd=round(statistics.stdev(values), 2) if len(values) > 1 else None,
        values=values,
    )


def collect(runs: Path, data: Path) -> dict:
    """The study's record from the run folders (module docstring)."""
    finished, missing = {}, []
    for folder in sorted(p for p in runs.iterdir() if p.is_dir() and "-s" in p.name):
        variant, seed = folder.name.rsplit("-s", 1)
        done = (folder / "report.json").is_file() and all((folder / f"{t}.json").is_file() for t in TESTS)
        if variant not in VARIANTS or not done:
            missing.append(folder.name)
            continue
        report = json.loads((folder / "report.json").read_text())
        tests = {t: json.loads((folder / f"{t}.json").read_text()) for t in TESTS}
        finished[(variant, int(seed))] = dict(report=report, tests=tests, folder=folder)
    systems = {}
    for variant in VARIANTS:
        seeds = sorted(seed for v, seed in finished if v == variant)
        if not seeds:
            continue
        runs_of = [finished[(variant, seed)] for seed in seeds]
        first = runs_of[0]["report"]
        systems[variant] = dict(
            about=VARIANTS[variant].about,
            seeds=seeds,
            parameters=first["parameters"],
            parser=first["data"]["parser"],
            # which trees the runs read (parser_fingerprint; absent: runs made before it was recorded)
            parser_fingerprints=sorted(
                {r["report"]["data"].get("parser_fingerprint") or "not recorded" for r in runs_of}
            )
            if first["data"]["parser"]
            else [],
            steps=first["steps"],
            valid_bleu=_mean_sd([r["report"]["valid"]["bleu_tokenized"]["bleu"] for r in runs_of]),
            train_minutes=_mean_sd([r["report"]["train_minutes_total"] for r in runs_of]),
            train_tokens_per_second=_mean_sd([r["report"]["train_tokens_per_second"] for r in runs_of]),
            tests={
                t: dict(
                    bleu_tokenized=_mean_sd([r["tests"][t]["bleu_tokenized"]["bleu"] for r in runs_of]),
                    sacrebleu=_mean_sd([r["tests"][t]["sacrebleu"]["bleu"] for r in runs_of]),
                    sacrebleu_signature=runs_of[0]["tests"][t]["sacrebleu"]["signature"],
                    translate_seconds=_mean_sd([r["tests"][t]["seconds"] for r in runs_of]),
                )
                for t in TESTS
            },
        )
    target = _target_language(finished)
    significance = _significance(finished, data, target)
    for variant, per_seed in significance.items():
        systems[variant]["against_baseline"] = per_seed
    some = next(iter(finished.values()), None)
    return dict(
        study="translation",
        target_language=target,
        data=f"Multi30k En->{target.capitalize()} ({data}): train 29,000 pairs, validation val (1,014), test_2016_flickr (1,000), "
        "test_2017_flickr (1,000); the lower-cased Moses-tokenised files",
        protocol="BLEU-4 on tokenised lower-cased references (sacrebleu tokenize=none) and sacreBLEU on detokenised "
        "output against the raw references (case:lc); beam 5; the epoch-end models of `schedule.averaged` "
        "averaged; paired bootstrap (1,000 resamples) against the baseline of the same seed, both test sets",
        schedule=None
        if some is None
        else dict(
            steps=some["report"]["steps"],
            warmup_steps=some["report"]["arguments"]["warmup_steps"],
            lr=some["report"]["arguments"]["lr"],
            max_tokens=some["report"]["arguments"]["max_tokens"],
            average_last=some["report"]["arguments"]["average_last"],
            averaged=sorted({r["report"]["averaged"]["last"] for r in finished.values()}),
            preset=some["report"]["preset"],
        ),
        device=None if some is None else f"{some['report']['device']}, {some['report']['threads']} thread(s)",
        systems=systems,
        missing=missing,
        code=code_version(),
    )


def _target_language(finished: dict) -> str:
    """The runs' target language: the suffix of their training target file (``de`` when there is no run).

    Raises:
        SystemExit: runs of more than one target language.
    """
    languages = {Path(r["report"]["data"]["target"]).suffix.lstrip(".") for r in finished.values()}
    if len(languages) > 1:
        raise SystemExit(f"the runs translate into several languages ({', '.join(sorted(languages))}): one at a time")
    return languages.pop() if languages else "de"


def _significance(finished: dict, data: Path, target: str) -> dict:
    """Per structured variant and seed: paired bootstrap against the same seed's baseline, both test sets."""
    out: dict = {}
    for (variant, seed), run in sorted(finished.items()):
        base = finished.get(("baseline", seed))
        if variant == "baseline" or base is None:
            continue
        rows = {}
        for t in TESTS:
            references = (data / "tok" / f"{t}.lc.norm.tok.{target}").read_text(encoding="utf-8").splitlines()
            hyps = (run["folder"] / f"{t}.hyp").read_text(encoding="utf-8").splitlines()
            base_hyps = (base["folder"] / f"{t}.hyp").read_text(encoding="utf-8").splitlines()
            result = paired_bootstrap(base_hyps, {variant: hyps}, references)[variant]
            rows[t] = dict(result, difference=round(result["bleu"] - result["baseline_bleu"], 2))
        out.setdefault(variant, {})[f"seed {seed}"] = rows
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="runs/translation-study")
    parser.add_argument("--data", default="../shared/data/multi30k")
    parser.add_argument("--out", default="records/translation/study.json")
    args = parser.parse_args(argv)
    record = collect(Path(args.runs), Path(args.data))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"{len(record['systems'])} systems, missing: {record['missing']} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
