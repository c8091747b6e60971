"""The prior study: one masked-LM recipe, several structural priors, 3 seeds.

**Recipe** (every encoder): the Tree Transformer's ``induce`` default training
(``syntaxformer/workflows/induce.py: resolve_recipe("tree-transformer", "default")``: the ``mini``
preset, 6,000 steps of 64 sentences, Adam lr 1e-3, 300 warm-up steps, linear decay to 0.1×, BERT
masking 15%), only the prior changing; no minute cap, so every run makes its steps. StructFormer (the
source of induced dependency trees, also scored) trains with its own default recipe on the same text.

**Two blocks**, because gold trees exist only for ptb-sample (DESIGN.md §6-7):

* ``ptb-lm`` — trained on the PTB language-modelling training text (``--ptb-lm DIR``:
  ``ptb.train.txt``), masked-LM perplexity (the Tree Transformer protocol, every word masked in
  turn) on the first ``--ppl-sentences`` sentences of ``ptb.test.txt``: ``transformer`` (prior none),
  ``constituent``, ``gaussian``, ``structformer``, ``sp-induced`` (structural positions from the
  same-seed StructFormer's maximum-spanning-tree heads of each unmasked sentence),
  ``sp-induced-masked`` (the same source, its trees parsed from every training batch as the model
  reads it, masks included: ``train --induced-from masked``), ``mgsa-ngram`` (heads: word, word,
  2-gram, 3-gram) and ``mgsa-induced`` (heads: word, word, tree, 2-gram; the phrases of the same-seed
  Tree Transformer's trees of each unmasked sentence).
* ``gold`` — trained on ptb-sample:dev (1,921 sentences with gold trees), perplexity on
  ptb-sample:test with its gold trees: ``transformer-gold-block`` (the control, prior none),
  ``sp-gold`` (gold dependencies) and ``mgsa-gold`` (gold constituents). The recipe's 6,000 steps
  overfit its 1,826 training sentences (the plain Transformer: perplexity 192.7 after 1,500 steps,
  286.7 after 6,000), so this block measures each model at its lowest validation loss (``train
  --keep-best``, evaluated every 250 steps on the 95 sentences held out), not at its last step, and
  stops 4 evaluations (1,000 steps) after it (``--early-stopping 4``; the schedule is still the recipe's).

**Per model**: ``train``; ``ppl`` (an induced structure taken as the system's training took it);
``ppl-masked`` for the systems trained with the unmasked sentence's induced structure (perplexity
again, each masked copy given the structure its source model induces from that copy, ``[MASK]``
included; ``ppl`` gives every copy the unmasked sentence's structure, whose source has seen the
masked word); ``probe`` (``syntaxformer probe``: SentLen, TreeDepth, TopConst,
BShift on ptb-sample, logistic regression, best layer chosen on dev, test accuracy); ``f1`` for the
models that induce trees (``parse`` + ``evaluate`` on ptb-sample:test, sentence F1; transductive for the
ptb-lm block, whose text contains ptb-sample's sentences); ``ppl`` and ``probe`` give a model the
``--trees`` / ``--phrases`` it was trained with (MG-SA ``tree`` heads: ``--phrases gold`` or the
same-seed Tree Transformer's ``induced:`` phrases); then ``report``: ``docs/results/priors/study.md``
and ``records/priors/prior-study.json`` (means ± sample sd over the seeds): one table of perplexity, F1 and
the best-layer probing accuracy beside the untrained twin's, and per task a table of every layer's
accuracy beside the majority class and the bag-of-words control.

Every stage skips what is done (a finished training, an existing result file) and training resumes
from its checkpoint, so one command serves the first start and every restart. The report also keeps
every model's measurements in ``records/priors/prior-study.json`` (``measurements``) and reads them back for the
models whose folders are not in ``--work`` (which is not in git), so models trained on different
machines add up::

    python -m benchmarks.studies.priors.prior_study --ptb-lm ../shared/data/ptb-lm --device cuda --jobs 6
    python -m benchmarks.studies.priors.prior_study --report-only      # the report alone, from --work and records/priors/
    python -m benchmarks.studies.priors.prior_study --ptb-lm ../shared/data/ptb-lm --max-steps 20 --seeds 0 \\
        --ppl-sentences 20 --probe-sentences 200 --work runs/prior-study-check --root runs/prior-study-check
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import ROOT
from benchmarks.tools.jobs import Job, add_job_options, module_command, passed_on, run_jobs
from benchmarks.tools.portable import CODE_JSON, record_code_version

logger = logging.getLogger("prior_study")

#: the encoders: block, prior, config overrides, trees / phrases source ("<system>" = that system's
#: same-seed model folder) and, for an induced source, ``induced_from`` (``train --induced-from``: the
#: unmasked sentence's structure, or each training batch's as the model reads it), and the registry
#: model (default tree-transformer)
SYSTEMS = {
    "transformer": dict(block="ptb-lm", prior="none"),
    "constituent": dict(block="ptb-lm", prior="constituent"),
    "gaussian": dict(block="ptb-lm", prior="gaussian"),
    "structformer": dict(block="ptb-lm", model="structformer", prior=None),
    "sp-induced": dict(
        block="ptb-lm", prior="structural-position", trees="induced:<structformer>", induced_from="sentence"
    ),
    "sp-induced-masked": dict(
        block="ptb-lm", prior="structural-position", trees="induced:<structformer>", induced_from="masked"
    ),
    "mgsa-ngram": dict(
        block="ptb-lm", prior="multi-granularity", overrides={"mgsa_granularities": "word*2,2gram,3gram"}
    ),
    "mgsa-induced": dict(
        block="ptb-lm",
        prior="multi-granularity",
        phrases="induced:<constituent>",
        induced_from="sentence",
        overrides={"mgsa_granularities": "word*2,tree,2gram"},
    ),
    "transformer-gold-block": dict(block="gold", prior="none"),
    "sp-gold": dict(block="gold", prior="structural-position", trees="gold"),
    "mgsa-gold": dict(
        block="gold", prior="multi-granularity", phrases="gold", overrides={"mgsa_granularities": "word*2,tree,2gram"}
    ),
}
GOLD_TRAIN, GOLD_TEST = "ptb-sample:dev", "ptb-sample:test"
#: the gold block's validation period (steps): the candidates of its model selection
GOLD_EVAL_EVERY = 250
#: the gold block stops after this many evaluations without a lower validation loss (1,000 steps)
GOLD_PATIENCE = 4
F1_TREEBANK = "ptb-sample:test"
#: the Tree Transformer systems' steps: the default recipe's when the study was measured (the recipe has
#: made 7,000 since), so that resumed and new seeds train as the recorded ones did
STUDY_STEPS = {"tree-transformer": 6000}


def folder(work: Path, key: str, seed: int) -> Path:
    return work / f"{key}-seed{seed}"


def resolve_source(spec: str | None, work: Path, seed: int) -> str | None:
    """``induced:<system>`` -> ``induced:<that system's model folder>``; other values unchanged."""
    if spec is None or "<" not in spec:
        return spec
    kind, name = spec.split(":<")
    return f"{kind}:{folder(work, name.rstrip('>'), seed) / 'model'}"


def training_fields(key: str, max_steps: int | None) -> tuple[dict, dict]:
    """The run's TrainArguments fields (recipe) and config overrides."""
    from syntaxformer.workflows.induce import resolve_recipe

    spec = SYSTEMS[key]
    model = spec.get("model", "tree-transformer")
    fields, overrides, _ = resolve_recipe(model, "default", prior=spec["prior"])
    fields.pop("max_minutes", None)
    if spec["prior"] not in (None, "constituent"):
        overrides.pop("constituent_variant", None)
    overrides.update(spec.get("overrides", {}))
    fields["max_steps"] = max_steps or STUDY_STEPS.get(model, fields["max_steps"])
    return fields, overrides


def measured_model(work: Path, key: str, seed: int) -> Path:
    """The model the stages measure: the gold block's model of the lowest validation loss
    (``model/best``; its 1,826 training sentences are overfitted long before the recipe's last step),
    the ptb-lm block's last model (``model``)."""
    from syntaxformer.training.best import BEST

    model = folder(work, key, seed) / "model"
    return model / BEST if SYSTEMS[key]["block"] == "gold" else model


def train_corpus(key: str, ptb_lm: Path) -> str:
    return GOLD_TRAIN if SYSTEMS[key]["block"] == "gold" else str(ptb_lm / "ptb.train.txt")


def training_record(work: Path, key: str, seed: int) -> dict:
    """The system's ``model/training.json`` (steps made, stop reason; ``{}`` before any step)."""
    return _read(folder(work, key, seed) / "model" / "training.json") or {}


def steps_trained(work: Path, key: str, seed: int) -> int:
    """Optimizer steps the system's model has made (0 before any)."""
    return training_record(work, key, seed).get("steps", 0)


def finished(work: Path, key: str, seed: int, max_steps: int | None) -> bool:
    """Whether the model has made its recipe's steps (``max_steps``: the ``--max-steps`` override) or,
    in the gold block, stopped early: the one rule for "trained", so no stage measures a model whose
    training was cut short."""
    record = training_record(work, key, seed)
    return (
        record.get("steps", 0) >= training_fields(key, max_steps)[0]["max_steps"]
        or record.get("stopped") == "early_stopping"
    )


def stage_train(key: str, work: Path, seed: int, args) -> None:
    from syntaxformer.tasks.language_model import TrainArguments
    from syntaxformer.tasks.run import train

    if finished(work, key, seed, args.max_steps):
        return
    out = folder(work, key, seed) / "model"
    fields, overrides = training_fields(key, args.max_steps)
    spec = SYSTEMS[key]
    extra = {name: resolve_source(spec.get(name), work, seed) for name in ("trees", "phrases") if spec.get(name)}
    if "induced_from" in spec:
        extra["induced_from"] = spec["induced_from"]
    gold = spec["block"] == "gold"  # the model of the lowest validation loss is the one measured
    train_args = TrainArguments(
        out=str(out),
        model=spec.get("model", "tree-transformer"),
        prior=spec["prior"],
        overrides=overrides,
        corpus=train_corpus(key, args.ptb_lm),
        seed=seed,
        device=args.device,
        threads=args.threads,
        resume=True,
        quiet=True,
        save_every=250 if gold else 500,
        eval_every=GOLD_EVAL_EVERY if gold else 1000,
        keep_best=gold,
        early_stopping=GOLD_PATIENCE if gold else 0,
        **extra,
        **fields,
    )
    logger.info("%s seed %d: training %d steps -> %s", key, seed, fields["max_steps"], out)
    train(train_args)
    if not finished(work, key, seed, args.max_steps):  # stopped by a signal or a cap: nothing may be measured
        raise SystemExit(
            f"{key} seed {seed}: training stopped at step {steps_trained(work, key, seed)} of "
            f"{fields['max_steps']}; run the study again to resume it"
        )
    record_code_version(folder(work, key, seed))


def cli(*argv: str) -> None:
    """``syntaxformer ARGV`` in a subprocess (its errors end the study with the command named)."""
    command = [sys.executable, "-m", "syntaxformer.cli", *argv]
    logger.info("%s", " ".join(command[2:]))
    subprocess.run(command, check=True)


def eval_trees(key: str, work: Path, seed: int) -> list[str]:
    """The evaluation's ``--trees`` / ``--phrases`` options for a model that reads dependency trees or
    has MG-SA ``tree`` heads (the sources it was trained with)."""
    options = []
    for name in ("trees", "phrases"):
        source = SYSTEMS[key].get(name)
        if source:
            options += [f"--{name}", "gold" if source == "gold" else resolve_source(source, work, seed)]
    return options


def reads_induced(key: str) -> bool:
    """Whether the system reads a structure another model induces (``sp-induced``, ``mgsa-induced``)."""
    return any(str(SYSTEMS[key].get(name, "")).startswith("induced:") for name in ("trees", "phrases"))


def ppl_corpus(key: str, work: Path, args) -> str:
    """The perplexity test set: ptb-sample:test (gold block), else the first ``--ppl-sentences``
    sentences of ``ptb.test.txt`` (written once into the work folder)."""
    if SYSTEMS[key]["block"] == "gold":
        return GOLD_TEST
    corpus = folder(work, "_data", 0) / "ptb-test-head.txt"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join((args.ptb_lm / "ptb.test.txt").read_text().splitlines()[: args.ppl_sentences]) + "\n"
    if not corpus.is_file() or corpus.read_text() != text:  # another process may be reading it
        corpus.write_text(text)
    return str(corpus)


def _perplexity(key: str, work: Path, seed: int, args, out: Path, *options: str) -> None:
    """``syntaxformer perplexity`` of the measured model, its JSON report written to ``out``."""
    command = [
        sys.executable,
        "-m",
        "syntaxformer.cli",
        "perplexity",
        "--model",
        str(measured_model(work, key, seed)),
        "--corpus",
        ppl_corpus(key, work, args),
        "--seed",
        str(seed),
        "--json",
        *eval_trees(key, work, seed),
        *options,
        *(["--device", args.device] if args.device else []),
    ]
    logger.info("%s", " ".join(command[2:]))
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    out.write_text(result.stdout)


def stage_ppl(key: str, work: Path, seed: int, args) -> None:
    """Masked-LM perplexity (``perplexity.json``); an induced structure comes from where the system's
    training took it (``induced_from``: the unmasked sentence, or each masked copy)."""
    out = folder(work, key, seed) / "perplexity.json"
    if not out.is_file():
        _perplexity(
            key,
            work,
            seed,
            args,
            out,
            *(["--induced-from", SYSTEMS[key]["induced_from"]] if reads_induced(key) else []),
        )


def stage_ppl_masked(key: str, work: Path, seed: int, args) -> None:
    """For a system trained with the unmasked sentence's induced structure: the perplexity with the
    structure the source model induces from each masked copy (``--induced-from masked``,
    ``perplexity-masked.json``), in which no structure carries information about the masked word."""
    out = folder(work, key, seed) / "perplexity-masked.json"
    if reads_induced(key) and SYSTEMS[key]["induced_from"] == "sentence" and not out.is_file():
        _perplexity(key, work, seed, args, out, "--induced-from", "masked")


def stage_probe(key: str, work: Path, seed: int, args) -> None:
    out = folder(work, key, seed) / "probe"
    if (out / "report.json").is_file():
        return
    options = ["--max-sentences", str(args.probe_sentences)] if args.probe_sentences else []
    cli(
        "probe",
        "--model",
        str(measured_model(work, key, seed)),
        "--out",
        str(out),
        "--classifier",
        "logreg",
        "--seed",
        str(seed),
        *options,
        *eval_trees(key, work, seed),
        *(["--device", args.device] if args.device else []),
    )


def stage_f1(key: str, work: Path, seed: int, args) -> None:
    if SYSTEMS[key]["prior"] not in (None, "constituent"):
        return  # induces no trees
    out = folder(work, key, seed) / "parse"
    if (out / "evaluation.json").is_file():
        return
    cli("parse", "--model", str(measured_model(work, key, seed)), "--treebank", F1_TREEBANK, "--out", str(out))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "syntaxformer.cli",
            "evaluate",
            "--pred",
            str(out / "trees.txt"),
            "--gold",
            F1_TREEBANK,
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (out / "evaluation.json").write_text(result.stdout)


STAGES = {"train": stage_train, "ppl": stage_ppl, "ppl-masked": stage_ppl_masked, "probe": stage_probe, "f1": stage_f1}


# --------------------------------------------------------------------------------------------------
# the report


def _read(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def _mean_sd(values: list[float]) -> dict | None:
    if not values:
        return None
    return dict(
        mean=statistics.fmean(values),
        sd=statistics.stdev(values) if len(values) > 1 else None,
        n=len(values),
        values=values,
    )


def _find(record, *names):
    """The first of ``names`` found (dotted paths allowed) in a JSON record, or None."""
    for name in names:
        value = record
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _probe_results(report: dict | None) -> dict:
    """One probe report's test accuracies per task: ``best`` (the trained encoder's layer chosen on dev),
    ``untrained`` (the same for its untrained twin), ``layers`` (per layer), ``majority`` and
    ``bag_of_words``."""
    return {
        task: dict(
            best=result["best_layer"]["trained"]["logreg"]["test"],
            untrained=result["best_layer"]["untrained"]["logreg"]["test"],
            layers=[layer["logreg"]["test"] for layer in result["layers"]["trained"]],
            majority=result["majority"]["test"],
            bag_of_words=result["bag_of_words"]["logreg"]["test"],
            n_test=result["n_sentences"]["test"],
        )
        for task, result in (report or {}).get("tasks", {}).items()
    }


def measurement(work: Path, key: str, seed: int, max_steps: int | None) -> dict | None:
    """One trained model's results read from its folder, or None before its training has finished:
    ``steps``, ``trained_by`` (the commit that finished its training, :data:`CODE_JSON`; None if not
    recorded), ``measured_step`` (the gold block's model of the lowest validation loss; None: the last),
    ``perplexity``, ``perplexity_masked_copy`` (:func:`stage_ppl_masked`) and ``sentence_f1`` (None until
    measured, or where they do not apply), ``probing`` (task -> accuracies, :func:`_probe_results`)."""
    if not finished(work, key, seed, max_steps):
        return None
    base = folder(work, key, seed)
    ppl, f1 = _read(base / "perplexity.json"), _read(base / "parse" / "evaluation.json")
    ppl_masked = _read(
        base / ("perplexity.json" if SYSTEMS[key].get("induced_from") == "masked" else "perplexity-masked.json")
    )
    best = _read(measured_model(work, key, seed) / "best.json")
    return dict(
        steps=steps_trained(work, key, seed),
        trained_by=_read(base / CODE_JSON),
        measured_step=best["step"] if best else None,
        perplexity=_find(ppl, "perplexity") if ppl else None,
        perplexity_masked_copy=_find(ppl_masked, "perplexity") if ppl_masked else None,
        sentence_f1=_find(f1, "sentence_f1", "constituency.sentence_f1") if f1 else None,
        probing=_probe_results(_read(base / "probe" / "report.json")),
    )


def recorded(root: Path) -> dict:
    """The measurements an earlier report recorded (``records/priors/prior-study.json``), ``{system: {seed:
    measurement}}``: the work folder is not kept in git, so a report written on another machine keeps
    the models trained and measured there."""
    study = _read(root / "records" / "priors" / "prior-study.json") or {}
    return {key: {int(seed): m for seed, m in by.items()} for key, by in study.get("measurements", {}).items()}


def gather(work: Path, seeds: list[int], max_steps: int | None, earlier: dict) -> dict:
    """``{system: {seed: measurement}}``: from the work folder, else from ``earlier`` (:func:`recorded`)."""
    found = {}
    for key in SYSTEMS:
        for seed in seeds:
            here = measurement(work, key, seed, max_steps)
            if here is None and seed in earlier.get(key, {}):
                logger.info("%s seed %d: taken from the earlier report (not trained in %s)", key, seed, work)
                here = earlier[key][seed]
            if here is not None:
                found.setdefault(key, {})[seed] = here
    return found


def _probe_summary(entries: list[dict]) -> dict:
    layers = [_mean_sd(list(values)) for values in zip(*(e["layers"] for e in entries))]
    return {
        name: _mean_sd([e[name] for e in entries if name in e])
        for name in ("best", "untrained", "majority", "bag_of_words", "n_test")
    } | dict(layers=layers)


def summarise(measurements: dict) -> dict:
    """Per system: the seeds trained, and mean ± sd over the seeds measured of perplexity, F1 and probing."""
    rows = {}
    for key in SYSTEMS:
        by_seed = measurements.get(key, {})
        done = [by_seed[s] for s in sorted(by_seed)]
        tasks = sorted({task for m in done for task in m["probing"]})
        rows[key] = dict(
            block=SYSTEMS[key]["block"],
            seeds_trained=sorted(by_seed),
            perplexity=_mean_sd([m["perplexity"] for m in done if m["perplexity"] is not None]),
            perplexity_masked_copy=_mean_sd(
                [m["perplexity_masked_copy"] for m in done if m.get("perplexity_masked_copy") is not None]
            ),
            sentence_f1=_mean_sd([m["sentence_f1"] for m in done if m["sentence_f1"] is not None]),
            probing={
                task: _probe_summary([m["probing"][task] for m in done if task in m["probing"]]) for task in tasks
            },
        )
    return rows


def _fmt(cell, digits: int = 2, show_n: bool = True) -> str:
    """``mean ± sd (n=k)``, ``–`` for no measurement."""
    if cell is None:
        return "–"
    sd = f" ± {cell['sd']:.{digits}f}" if cell["sd"] is not None else ""
    return f"{cell['mean']:.{digits}f}{sd}" + (f" (n={cell['n']})" if show_n else "")


def _resolution(rows: dict) -> str:
    """What one probing accuracy resolves: the binomial standard error at 50% on the test sentences."""
    sizes = {
        n
        for row in rows.values()
        for entry in row["probing"].values()
        for n in (entry["n_test"] or {}).get("values", [])
    }
    if not sizes:
        return ""
    n = min(sizes)
    se = 100 * (0.25 / n) ** 0.5
    return (
        f" A probing test split has {n} sentences (ptb-sample, 80/10/10 split): one accuracy near 50% has a "
        f"standard error of {se:.1f} points, the difference of two independent ones {2**0.5 * se:.1f} "
        f"(95% interval ± {1.96 * 2**0.5 * se:.1f}): smaller differences between two single measurements "
        "are not resolved."
    )


def markdown(rows: dict, args) -> str:
    tasks = sorted({task for row in rows.values() for task in row["probing"]})
    probed = {key: row for key, row in rows.items() if row["probing"]}
    lines = [
        "# The prior study",
        "",
        "Produced by `benchmarks/studies/priors/prior_study.py` (its docstring gives the recipe and the two blocks). "
        f"Seeds {', '.join(map(str, args.seeds))}; mean ± sample sd (n = seeds measured). Probing: "
        "logistic regression, test accuracy (%) at the layer chosen on dev, mean over the seeds probed; "
        "in brackets the same architecture untrained. The ptb-lm block is measured at the recipe's last step, "
        f"the gold block at each model's lowest validation loss (every {GOLD_EVAL_EVERY} steps; the step is "
        "`measured_step` in `records/priors/prior-study.json`)." + _resolution(rows),
        "",
        "A system that reads a structure another model induces is scored with the structure its training "
        "read (`masked-LM ppl`: the unmasked sentence's, whose source has seen the masked word, for "
        "`sp-induced` and `mgsa-induced`; each masked input's for `sp-induced-masked`) and, in `ppl, "
        "structure of each masked copy`, with the structure the source model induces from each one-mask "
        "copy, `[MASK]` included (`perplexity --induced-from masked`): no structure then carries "
        "information about the masked word.",
        "",
        "| encoder | block | seeds trained | masked-LM ppl | ppl, structure of each masked copy | "
        "sentence F1 (ptb-sample:test) | " + " | ".join(f"{t} (%)" for t in tasks) + " |",
        "|---|---|---|---|---|---|" + "---|" * len(tasks),
    ]
    for key, row in rows.items():
        cells = [
            f"{_fmt(row['probing'][t]['best'], 1, False)} [{_fmt(row['probing'][t]['untrained'], 1, False)}]"
            if t in row["probing"]
            else "–"
            for t in tasks
        ]
        lines.append(
            f"| {key} | {row['block']} | {', '.join(map(str, row['seeds_trained'])) or '–'} | "
            f"{_fmt(row['perplexity'])} | {_fmt(row.get('perplexity_masked_copy'))} | "
            f"{_fmt(row['sentence_f1'])} | " + " | ".join(cells) + " |"
        )
    for task in tasks:
        rows_of = {key: row["probing"][task] for key, row in probed.items() if task in row["probing"]}
        n_layers = max(len(entry["layers"]) for entry in rows_of.values())
        lines += [
            "",
            f"## {task}: test accuracy (%) per layer (0 = embeddings)",
            "",
            "| encoder | majority | bag of words | " + " | ".join(f"layer {i}" for i in range(n_layers)) + " |",
            "|---|---|---|" + "---|" * n_layers,
        ]
        for key, entry in rows_of.items():
            layers = [_fmt(cell, 1, False) for cell in entry["layers"]] + ["–"] * (n_layers - len(entry["layers"]))
            lines.append(
                f"| {key} | {_fmt(entry['majority'], 1, False)} | {_fmt(entry['bag_of_words'], 1, False)} | "
                + " | ".join(layers)
                + " |"
            )
    return "\n".join(lines) + "\n"


def stage_report(work: Path, root: Path, args) -> None:
    """Write ``records/priors/prior-study.json`` and the page ``docs/results/priors/study.md`` under ``root``,
    keeping the measurements the record already holds."""
    measurements = gather(work, args.seeds, args.max_steps, recorded(root))
    rows = summarise(measurements)
    records, pages = root / "records" / "priors", root / "docs" / "results" / "priors"
    records.mkdir(parents=True, exist_ok=True)
    pages.mkdir(parents=True, exist_ok=True)
    record = dict(
        seeds=args.seeds,
        systems=rows,
        measurements={key: {str(s): m for s, m in by.items()} for key, by in measurements.items()},
    )
    (records / "prior-study.json").write_text(json.dumps(record, indent=2) + "\n")
    (pages / "study.md").write_text(markdown(rows, args))
    logger.info("wrote %s and %s", pages / "study.md", records / "prior-study.json")


# --------------------------------------------------------------------------------------------------


def order(keys: list[str]) -> list[str]:
    """Tree sources first (structformer, constituent), so the systems that read their trees find them."""
    first = [k for k in ("structformer", "constituent") if k in keys]
    return first + [k for k in keys if k not in first]


def seed_jobs(argv: list[str], args) -> list[Job]:
    """Each seed's systems as one job (this script with ``--seeds S --jobs 1 --no-report``), logging to
    ``WORK/seedS.log``."""
    return [
        Job(
            f"seed{seed}",
            module_command(__spec__.name, *passed_on(argv), "--seeds", seed, "--jobs", "1", "--no-report"),
            log=args.work / f"seed{seed}.log",
        )
        for seed in args.seeds
    ]


def run_parallel(argv: list[str], args) -> None:
    """Each seed's systems in one process per seed, ``args.jobs`` at a time (the tree sources train
    before their readers within a seed)."""
    if run_jobs(seed_jobs(argv, args), args.jobs, args.dry_run):
        raise RuntimeError(f"a seed failed (see {args.work}/seed*.log)")


def run_stages(argv: list[str] | None, args) -> None:
    """The chosen stages of the chosen systems and seeds (seeds in parallel processes with ``--jobs``)."""
    if args.dry_run or (args.jobs > 1 and len(args.seeds) > 1):
        run_parallel(argv if argv is not None else sys.argv[1:], args)
        return
    for seed in args.seeds:
        for key in order(args.systems):
            for stage in args.stages:
                if stage != "train" and not finished(args.work, key, seed, args.max_steps):
                    logger.warning("%s seed %d: %s skipped (training not finished)", key, seed, stage)
                    continue
                STAGES[stage](key, args.work, seed, args)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "--ptb-lm",
        type=Path,
        default=ROOT.parent / "shared" / "data" / "ptb-lm",
        help="folder with ptb.train.txt and ptb.test.txt",
    )
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "prior-study")
    p.add_argument("--root", type=Path, default=ROOT, help="where records/priors/ and docs/results/priors/ are")
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--stages", nargs="+", default=list(STAGES), choices=list(STAGES))
    p.add_argument("--max-steps", type=int, default=None, help="override the recipe's steps (a quick check)")
    p.add_argument("--ppl-sentences", type=int, default=1000, help="sentences of ptb.test.txt scored")
    p.add_argument("--probe-sentences", type=int, default=None, help="probe --max-sentences (a quick check)")
    p.add_argument("--device", default=None)
    add_job_options(p, "seeds in parallel processes")
    p.add_argument("--no-report", action="store_true")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="run no stage; write the report from the finished models in --work and the "
        "measurements recorded under --root",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.report_only and args.no_report:
        p.error("--report-only and --no-report together do nothing")
    if not args.report_only and not (args.ptb_lm / "ptb.train.txt").is_file():
        p.error(f"{args.ptb_lm}/ptb.train.txt not found (--ptb-lm)")
    start = time.monotonic()
    if not args.report_only:
        run_stages(argv, args)
    if not args.no_report and not args.dry_run:
        stage_report(args.work, args.root, args)
    logger.info("done in %.1f minutes", (time.monotonic() - start) / 60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
