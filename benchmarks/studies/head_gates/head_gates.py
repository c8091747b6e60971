"""Hard-concrete head gates at several λ: heads kept, perplexity, F1.

For each λ of ``--lambdas``, ``syntaxformer train --model MODEL --head-gates --gate-l0 λ``
fine-tunes the model (default: the shipped Tree Transformer parser) for ``--steps`` steps with the
source's own batch size and masking, its learning rate × :data:`LR_FRACTION` (constant, no warm-up)
for the weights and :data:`GATE_LR` for the gates (β = 0.33, initial ``log α`` = 3); the saved model
is the binarised, pruned one. λ = 0 is the control: the same fine-tuning with gates but no penalty
(what fine-tuning alone does). Each saved model, and the source, is then measured as
``syntaxformer prune`` measures a point: masked-LM perplexity with the one-mask-per-input protocol on
the source's held-out text (its ``training.json``: the trainer's held-out 5% of ptb-sample), and
sentence F1 on ptb-sample:dev for models that induce trees.

Resumable: a finished λ (``WORK/gates-λ/result.json``) is skipped, an interrupted one resumes from
its checkpoint. Writes ``records/heads/gates-NAME.json`` and ``docs/results/heads/gates.md`` (a table).

    python -m benchmarks.studies.head_gates.head_gates                                     # the shipped parser, CPU
    python -m benchmarks.studies.head_gates.head_gates --model DIR --name my-model --device cuda
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from benchmarks import ROOT

logger = logging.getLogger("head_gates")

#: λ values (nats per expected open head); 0 is the control.
LAMBDAS = (0.0, 0.03, 0.1, 0.3)
#: Fine-tuning steps per λ.
STEPS = 600
#: The weights' learning rate: the source's × this (constant).
LR_FRACTION = 0.1
#: The gates' learning rate (Adam; log α starts at 3 and must fall below 0 to close: at 0.01 no gate of
#: the shipped parser closed in 300 steps at λ = 0.1, at 0.05 three did).
GATE_LR = 0.05


def gate_arguments(source: Path, out: Path, lam: float, steps: int, seed: int, device: str | None, threads: int | None):
    """The :class:`~syntaxformer.training.arguments.TrainArguments` of one gate run: the source's batch
    size, masking and corpus (its ``training.json``; the trainer's defaults where unknown)."""
    from syntaxformer.parsing import read_training_record
    from syntaxformer.tasks.language_model import TrainArguments

    source_args = read_training_record(source).get("arguments") or {}
    defaults = TrainArguments(out="")
    take = lambda name: source_args.get(name, getattr(defaults, name))  # noqa: E731
    return TrainArguments(
        out=str(out),
        init_from=str(source),
        head_gates=True,
        gate_l0=lam,
        gate_lr=GATE_LR,
        corpus=take("corpus"),
        valid=take("valid"),
        valid_fraction=take("valid_fraction"),
        batch_size=take("batch_size"),
        mask_rate=take("mask_rate"),
        mask_replace=take("mask_replace"),
        lr=take("lr") * LR_FRACTION,
        max_steps=steps,
        seed=seed,
        device=device,
        threads=threads,
        resume=True,
        quiet=True,
        save_every=250,
        eval_every=max(1, steps // 2),
    )


def measure_folder(
    folder: Path, source: Path, seed: int, device: str | None, options, max_sentences: int | None = None
) -> dict:
    """Perplexity (one mask per input) on the source's held-out text and, for models that induce
    trees, sentence F1 (0-100) on ptb-sample:dev: a point of ``syntaxformer prune``'s curve."""
    from syntaxformer.analysis.pruning import measure
    from syntaxformer.parsing import load_model, read_training_record
    from syntaxformer.workflows.prune import prepare_data

    model, tokenizer, _ = load_model(folder, device=device)
    data, described = prepare_data(
        model, tokenizer, read_training_record(source), None, max_sentences, seed, options, 32, 4096, "prune"
    )
    return dict(measure(model, tokenizer, [], data), data=described)


def run_gate(
    source: Path,
    work: Path,
    lam: float,
    steps: int,
    seed: int,
    device: str | None,
    threads: int | None,
    options,
    max_sentences: int | None = None,
) -> dict:
    """Train (or resume, or skip) the gate run of ``lam`` into ``WORK/gates-λ`` and measure it;
    returns (and writes) its ``result.json``."""
    from syntaxformer.tasks.run import train

    out = work / f"gates-{lam:g}"
    if (out / "result.json").is_file():
        return json.loads((out / "result.json").read_text())
    record = out / "training.json"
    if not (record.is_file() and json.loads(record.read_text())["steps"] >= steps):
        logger.info("lambda %g: %d steps from %s -> %s", lam, steps, source, out)
        train(gate_arguments(source, out, lam, steps, seed, device, threads))
    training = json.loads(record.read_text())
    gates = json.loads((out / "gates.json").read_text())
    result = measure_folder(out, source, seed, device, options, max_sentences)
    head_gates = training["head_gates"]
    result.update(
        gate_l0=lam,
        steps=training["steps"],
        train_minutes=training["train_minutes_total"],
        device=training["device"],
        n_kept=gates["n_kept"],
        n_heads=gates["n_heads"],
        kept_per_layer=gates["kept_per_layer"],
        closed=gates["closed"],
        silenced=gates["silenced"],
        expected_open=gates["expected_open"],
        max_binarisation_change=gates["max_binarisation_change"],
        valid_loss_gated=training["final_valid_loss"],
        valid_loss_pruned=head_gates["pruned_valid_loss"],
        parameters=training["parameters"],
        parameters_after_pruning=head_gates["parameters_after_pruning"],
        arguments={
            k: training["arguments"][k]
            for k in (
                "lr",
                "gate_lr",
                "gate_temperature",
                "gate_init",
                "batch_size",
                "mask_rate",
                "mask_replace",
                "seed",
            )
        },
    )
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    logger.info(
        "lambda %g: %d/%d heads kept %s, perplexity %.2f%s",
        lam,
        result["n_kept"],
        result["n_heads"],
        result["kept_per_layer"],
        result["perplexity"],
        f", sentence F1 {result['sentence_f1']:.2f}" if "sentence_f1" in result else "",
    )
    return result


def _fmt(value, spec):
    return "–" if value is None else format(value, spec)


def table(report: dict) -> str:
    """The markdown table of a report: the source, then one row per λ."""
    source = report["source"]
    lines = [
        "| λ | heads kept (per layer) | perplexity | sentence F1 | valid loss gated → pruned | parameters |",
        "|---|---|---|---|---|---|",
        f"| source (no fine-tuning) | {source['n_heads']}/{source['n_heads']} | {source['perplexity']:.1f} | "
        f"{_fmt(source.get('sentence_f1'), '.2f')} | – | {source['parameters']:,} |",
    ]
    for r in report["runs"]:
        silenced = f", silenced {r['silenced']}" if r["silenced"] else ""
        lines.append(
            f"| {r['gate_l0']:g} | {r['n_kept']}/{r['n_heads']} {r['kept_per_layer']}{silenced} | "
            f"{r['perplexity']:.1f} | {_fmt(r.get('sentence_f1'), '.2f')} | "
            f"{r['valid_loss_gated']:.3f} → {r['valid_loss_pruned']:.3f} | {r['parameters_after_pruning']:,} |"
        )
    return "\n".join(lines)


def write_docs(report: dict, root: Path, name: str) -> None:
    """Write the record ``records/heads/gates-NAME.json`` and the page ``docs/results/heads/gates.md`` under
    ``root``."""
    (root / "records" / "heads").mkdir(parents=True, exist_ok=True)
    (root / "records" / "heads" / f"gates-{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    s = report["settings"]
    text = [
        f"# Hard-concrete head gates: {name}",
        "",
        f"Written by `benchmarks/studies/head_gates/head_gates.py`; numbers in `records/heads/gates-{name}.json`.",
        "",
        f"- model: `{report['model']}` ({report['model_type']}, {report['source']['n_heads']} heads); "
        f"seed {report['seed']}; device {report['runs'][0]['device'] if report['runs'] else '–'}",
        f"- gates: `train --model MODEL --head-gates --gate-l0 λ`, {s['steps']} steps of "
        f"{s['batch_size']} sentences, weights at lr {s['lr']:g} (constant), gates at lr {s['gate_lr']:g}, "
        f"β {s['gate_temperature']:g}, initial log α {s['gate_init']:g}; at the end a gate is open when its "
        "test-time value is above 0.5, and the closed heads are pruned (the saved model)",
        f"- perplexity: {report['protocol']['perplexity']}; on {report['text']}",
        f"- F1: sentence-level, ptb-sample:dev ({report['source'].get('n_f1_sentences', '–')} sentences), "
        f"decoder {report['decoder']}",
        "",
        table(report),
        "",
    ]
    (root / "docs" / "results" / "heads").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "results" / "heads" / "gates.md").write_text("\n".join(text))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--model", type=Path, default=None, help="model folder (default: the shipped parser)")
    p.add_argument("--name", default=None, help="name in the outputs (default: the folder's name)")
    p.add_argument("--lambdas", type=float, nargs="+", default=list(LAMBDAS))
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--work", type=Path, default=None, help="default runs/head-gates/NAME")
    p.add_argument("--root", type=Path, default=ROOT, help="where records/ and docs/results/ go")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--min-layer",
        type=int,
        default=None,
        help="Algorithm 1's minimum layer (default: the shipped parser's for it, else the decoder's)",
    )
    p.add_argument("--max-sentences", type=int, default=None, help="of the held-out text (a quick check)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from syntaxformer.evaluation.perplexity import PROTOCOL
    from syntaxformer.pretrained import model_or_pretrained
    from syntaxformer.runtime import prepare_process
    from syntaxformer.structures import DecoderOptions

    prepare_process()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    source, options = model_or_pretrained(args.model, DecoderOptions(min_layer=args.min_layer))
    source = Path(source)
    name = args.name or source.name
    work = args.work or ROOT / "runs" / "head-gates" / name
    start = time.monotonic()
    measured = measure_folder(source, source, args.seed, args.device, options, args.max_sentences)
    from syntaxformer.analysis.heads import head_layout
    from syntaxformer.parsing import load_model

    model, _, _ = load_model(source)
    measured.update(
        n_heads=len([h for hs in head_layout(model).present for h in hs]),
        parameters=sum(p.numel() for p in model.parameters()),
        n_f1_sentences=measured["data"]["n_treebank_sentences"],
    )
    runs = [
        run_gate(source, work, lam, args.steps, args.seed, args.device, args.threads, options, args.max_sentences)
        for lam in args.lambdas
    ]
    first = gate_arguments(source, work, 0.0, args.steps, args.seed, args.device, args.threads)
    report = dict(
        model=str(source.relative_to(ROOT) if source.is_relative_to(ROOT) else source),
        model_type=model.config.model_type,
        seed=args.seed,
        decoder=dict(min_layer=options.min_layer),
        text=measured["data"]["text"]["source"],
        protocol=dict(perplexity=PROTOCOL),
        settings=dict(
            steps=args.steps,
            batch_size=first.batch_size,
            lr=first.lr,
            gate_lr=GATE_LR,
            gate_temperature=first.gate_temperature,
            gate_init=first.gate_init,
            mask_rate=first.mask_rate,
            mask_replace=first.mask_replace,
        ),
        source={k: v for k, v in measured.items() if k != "data"},
        runs=runs,
        minutes=round((time.monotonic() - start) / 60, 2),
    )
    write_docs(report, args.root, name)
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
