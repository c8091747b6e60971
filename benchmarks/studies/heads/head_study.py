"""The attention-head study: does a structural prior concentrate the heads' work?

Three models trained on ptb-sample's words with the same data and seed: the **Tree Transformer**
(``induce``'s default recipe: mini, official constituent variant, 6,000 steps of 64 sentences, lr 1e-3
linear decay), the **plain Transformer** (the same recipe and steps with ``prior="none"``) and the
**StructFormer** (its own default recipe: mini, 5,400 steps, lr 5e-4, 30% always-[MASK] masking). The
recipes' ``max_minutes`` safety cap is dropped so every run makes exactly its steps. Then, per model:

1. ``train`` — the run (``runs/head-study/<key>/model``; resumable from its checkpoint);
2. ``heads`` — ``syntaxformer heads`` (importance on the model's held-out 5% of ptb-sample, roles;
   dependencies: ptb-sample:dev and, when present, UD-EWT dev) into ``<key>/heads``;
3. ``prune`` — ``syntaxformer prune`` (importance and confidence orders, random over 3 seeds, step 0.1;
   masked-LM perplexity, one mask per input, on the held-out text; sentence F1 on ptb-sample:dev)
   into ``<key>/prune``;
4. ``gates`` — ``syntaxformer train --model <key>/model --head-gates --gate-l0 λ`` for every λ of
   ``--lambdas`` (λ = 0 is the control: the same fine-tuning with gates but no penalty), then the same
   perplexity and F1 on the saved, pruned model, into ``<key>/gates-<λ>`` (settings and code:
   ``benchmarks/studies/head_gates/head_gates.py``);
5. ``report`` — ``docs/results/heads/study.md`` (tables), ``records/heads/head-study.json`` and the figure
   ``docs/results/heads/head-study.{png,svg}``.

Every stage skips what is already done (a finished training, an existing ``heads.json`` /
``prune.json`` / ``result.json``) and training resumes from checkpoints, so the same command serves
the first start and every restart. ``--device cuda`` runs the work on a GPU; ``--max-steps`` (and
``--gate-steps``, ``--max-sentences``) make a quick check at a tiny scale (write it elsewhere with
``--work`` and ``--root``).

    python -m benchmarks.studies.heads.head_study --device cuda                       # the study (GPU: minutes)
    python -m benchmarks.studies.heads.head_study --max-steps 200 --gate-steps 40 --max-sentences 60 \\
        --work runs/head-study-check --root runs/head-study-check   # end-to-end check, CPU
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

from benchmarks import ROOT

#: λ of the gate runs and their steps: benchmarks/studies/head_gates/head_gates.py's (0 = fine-tuning with gates,
#: no penalty).
from benchmarks.studies.head_gates.head_gates import LAMBDAS
from benchmarks.studies.head_gates.head_gates import STEPS as GATE_STEPS
from benchmarks.tools.jobs import Job, add_job_options, module_command, passed_on, run_jobs
from benchmarks.tools.portable import portable

logger = logging.getLogger("head_study")

#: key -> (registry model, its induce recipe, prior, label)
STUDY = {
    "tree-transformer": dict(model="tree-transformer", recipe="default", prior=None, label="Tree Transformer"),
    "transformer": dict(model="tree-transformer", recipe="default", prior="none", label="Transformer (no prior)"),
    "structformer": dict(model="structformer", recipe="default", prior=None, label="StructFormer"),
}

UD_EWT_DEV = ROOT.parent / "shared" / "data" / "ud-ewt" / "en_ewt-ud-dev.conllu"
F1_TREEBANK = "ptb-sample:dev"
PRUNE_ORDERS = ("importance", "confidence")
PRUNE_STEP = 0.1


# --------------------------------------------------------------------------------------------------
# stages


def recipe(key: str, max_steps: int | None) -> tuple[dict, dict, int | None]:
    """The run's TrainArguments fields, config overrides and Algorithm 1 minimum layer."""
    from syntaxformer.workflows.induce import resolve_recipe

    spec = STUDY[key]
    fields, overrides, min_layer = resolve_recipe(spec["model"], spec["recipe"], prior=spec["prior"])
    fields.pop("max_minutes", None)  # exactly the recipe's steps on any machine
    if max_steps is not None:
        fields["max_steps"] = max_steps
    return fields, overrides, min_layer


def decoder_options(key: str, max_steps: int | None):
    from syntaxformer.structures import DecoderOptions

    return DecoderOptions(min_layer=recipe(key, max_steps)[2])


def finished(folder: Path, steps: int) -> bool:
    record = folder / "training.json"
    return record.is_file() and json.loads(record.read_text())["steps"] >= steps


def stage_train(key: str, work: Path, seed: int, device: str | None, max_steps: int | None, threads: int | None):
    from syntaxformer.tasks.language_model import TrainArguments
    from syntaxformer.tasks.run import train

    fields, overrides, _ = recipe(key, max_steps)
    out = work / key / "model"
    if finished(out, fields["max_steps"]):
        logger.info("%s: trained (%s)", key, out)
        return
    args = TrainArguments(
        out=str(out),
        model=STUDY[key]["model"],
        prior=STUDY[key]["prior"],
        overrides=overrides,
        corpus="ptb-sample",
        seed=seed,
        device=device,
        threads=threads,
        resume=True,
        quiet=True,
        save_every=500,
        eval_every=1000,
        **fields,
    )
    logger.info("%s: training %d steps -> %s", key, fields["max_steps"], out)
    train(args)


def stage_heads(key: str, work: Path, seed: int, device: str | None, max_sentences: int | None, ud_ewt: Path):
    from syntaxformer.analysis.heads import analyse_heads, write_heads_outputs

    out = work / key / "heads"
    if (out / "heads.json").is_file():
        return
    dependencies = ["ptb-sample:dev"] + ([str(ud_ewt)] if ud_ewt.is_file() else [])
    if len(dependencies) == 1:
        logger.warning("UD-EWT dev (%s) is absent: syntactic roles on ptb-sample:dev only (unlabelled)", ud_ewt)
    report = analyse_heads(
        work / key / "model", dependencies=dependencies, seed=seed, max_sentences=max_sentences, device=device
    )
    write_heads_outputs(report, out)


def stage_prune(
    key: str,
    work: Path,
    seed: int,
    device: str | None,
    max_sentences: int | None,
    max_steps: int | None,
    step: float,
    seeds: int,
):
    from syntaxformer.workflows.prune import run_prune

    out = work / key / "prune"
    if (out / "prune.json").is_file():
        return
    run_prune(
        out,
        model=work / key / "model",
        orders=PRUNE_ORDERS,
        step=step,
        seed=seed,
        seeds=seeds,
        options=decoder_options(key, max_steps),
        device=device,
        max_sentences=max_sentences,
    )


def stage_gates(
    key: str,
    work: Path,
    seed: int,
    device: str | None,
    lambdas,
    gate_steps: int,
    max_sentences: int | None,
    max_steps: int | None,
    threads: int | None,
) -> list[dict]:
    """The gate runs of ``benchmarks/studies/head_gates/head_gates.py`` (same settings) from the study's model."""
    from head_gates import run_gate

    return [
        run_gate(
            work / key / "model",
            work / key,
            lam,
            gate_steps,
            seed,
            device,
            threads,
            decoder_options(key, max_steps),
            max_sentences,
        )
        for lam in lambdas
    ]


# --------------------------------------------------------------------------------------------------
# the report


def importance_distribution(raw: list[list[float | None]]) -> dict:
    """How concentrated a model's raw importance is: the heads' shares of the total (descending),
    the share of the top quarter of heads (%), and the Gini coefficient (0: all equal, → 1: one head)."""
    values = sorted((v for row in raw for v in row if v is not None), reverse=True)
    total = sum(values)
    shares = [v / total for v in values]
    n = len(values)
    ascending = sorted(values)
    gini = sum((2 * (i + 1) - n - 1) * v for i, v in enumerate(ascending)) / (n * total)
    top = max(1, round(n / 4))
    return dict(
        shares=[round(s, 5) for s in shares],
        top_quarter_share=round(100 * sum(shares[:top]), 2),
        gini=round(gini, 4),
        n_heads=n,
        max_over_median=round(values[0] / statistics.median(values), 3),
    )


def role_counts(heads: dict) -> dict:
    """Positional heads, syntactic heads per gold source (≥ 10 points over the baseline), best
    'attends to its head' accuracy on ptb-sample:dev beside its baseline."""
    roles = [r for row in heads["positional"]["role"] for r in row if r is not None]
    syntactic = {}
    for layer, row in enumerate(heads["syntactic"]["heads"]):
        for head, entries in enumerate(row):
            for e in entries:
                syntactic.setdefault(e["source"], set()).add((layer, head))
    ptb = next(d for d in heads["dependencies"] if d["source"].startswith("ptb-sample"))
    best = max(v for row in ptb["unlabelled_accuracy"] for v in row if v is not None)
    return dict(
        positional=sum(1 for r in roles if r),
        positional_previous=roles.count("previous"),
        positional_next=roles.count("next"),
        syntactic={source: len(h) for source, h in syntactic.items()},
        syntactic_any=len(set().union(*syntactic.values())) if syntactic else 0,
        sources=[d["source"] for d in heads["dependencies"]],
        ptb_attends_to_head_best=best,
        ptb_attends_to_head_baseline=ptb["unlabelled_baseline"],
    )


def curve_points(prune: dict, order: str) -> list[dict]:
    keep = ("fraction", "n_removed", "fraction_removed", "perplexity", "perplexity_sd", "sentence_f1", "sentence_f1_sd")
    return [{k: p[k] for k in keep if k in p} for p in prune["orders"][order]["points"]]


def summarise(work: Path, lambdas, args) -> dict:
    models = {}
    for key, spec in STUDY.items():
        folder = work / key
        training = json.loads((folder / "model" / "training.json").read_text())
        heads = json.loads((folder / "heads" / "heads.json").read_text())
        prune = json.loads((folder / "prune" / "prune.json").read_text())
        gates = [json.loads((folder / f"gates-{lam:g}" / "result.json").read_text()) for lam in lambdas]
        models[key] = dict(
            label=spec["label"],
            model=spec["model"],
            prior=training["prior"],
            preset=training["preset"],
            steps=training["steps"],
            parameters=training["parameters"],
            train_minutes=training["train_minutes_total"],
            device=training["device"],
            final_valid_loss=training["final_valid_loss"],
            layers=heads["layers"],
            heads_per_layer=heads["heads"],
            importance=dict(
                raw=heads["importance"]["raw"],
                normalised=heads["importance"]["normalised"],
                n_masked_tokens=heads["importance"]["n_masked_tokens"],
                **importance_distribution(heads["importance"]["raw"]),
            ),
            roles=role_counts(heads),
            confidence=heads["confidence"],
            text=heads["text"],
            prune_data=prune["data"],
            fractions_left_out=prune["fractions_left_out"],
            curves={order: curve_points(prune, order) for order in prune["orders"]},
            curve_labels={order: curve["label"] for order, curve in prune["orders"].items()},
            gates=[
                {
                    k: g[k]
                    for k in (
                        "gate_l0",
                        "steps",
                        "n_kept",
                        "n_heads",
                        "kept_per_layer",
                        "silenced",
                        "perplexity",
                        "sentence_f1",
                        "expected_open",
                        "max_binarisation_change",
                        "valid_loss_gated",
                        "valid_loss_pruned",
                        "parameters_after_pruning",
                    )
                    if k in g
                }
                for g in gates
            ],
        )
    from head_gates import GATE_LR, LR_FRACTION

    from syntaxformer.evaluation.constituency import PROTOCOL as F1_PROTOCOL
    from syntaxformer.evaluation.perplexity import PROTOCOL as PPL_PROTOCOL

    return dict(
        study="attention heads: Tree Transformer vs plain Transformer vs StructFormer",
        data="ptb-sample (embedded WSJ sample, PRPN preprocessing); the trainer holds out 5% (seed-0 permutation)",
        seed=args.seed,
        protocol=dict(
            perplexity=PPL_PROTOCOL + "; on each model's held-out 5% of ptb-sample",
            f1="sentence-level F1 (0-100) on " + F1_TREEBANK + "; " + str(F1_PROTOCOL),
            importance="Michel et al. 2019 |dL/dxi| on the held-out text (syntaxformer heads), raw",
            gates=f"train --model MODEL --head-gates --gate-l0 LAMBDA: {args.gate_steps} steps, weights at "
            f"{LR_FRACTION} x the recipe's lr (constant), gates' lr {GATE_LR}, beta 0.33, log alpha "
            "init 3; closed heads pruned (binarised test-time gate <= 0.5); benchmarks/studies/head_gates/head_gates.py",
        ),
        lambdas=list(lambdas),
        models=models,
    )


def _fmt(value, spec=".1f", missing="–"):
    return missing if value is None else format(value, spec)


def _at(curve: list[dict], n_removed_fraction: float, name: str):
    """The point of ``curve`` at the given nominal fraction, or None if left out."""
    return next((p.get(name) for p in curve if abs(p["fraction"] - n_removed_fraction) < 1e-9), None)


def pruning_curves(models: dict, keys: list[str]) -> list[str]:
    """The pruning-curve section of docs/results/heads/study.md: one table per model."""
    lines = []
    lines += ["", "## Pruning curves (`syntaxformer prune`; perplexity / sentence F1; random: mean ± sd)", ""]
    for key in keys:
        m = models[key]
        orders = list(m["curves"])
        lines += [
            f"**{m['label']}**"
            + (
                f" (left out, more than one head per layer: {m['fractions_left_out']})"
                if m["fractions_left_out"]
                else ""
            ),
            "",
            "| heads removed | " + " | ".join(orders) + " |",
            "|---|" + "---|" * len(orders),
        ]
        for i, point in enumerate(m["curves"][orders[0]]):
            cells = []
            for order in orders:
                p = m["curves"][order][i]
                ppl = _fmt(p["perplexity"]) + (f" ± {p['perplexity_sd']:.1f}" if "perplexity_sd" in p else "")
                f1 = (
                    ""
                    if "sentence_f1" not in p
                    else " / "
                    + _fmt(p["sentence_f1"], ".2f")
                    + (f" ± {p['sentence_f1_sd']:.2f}" if "sentence_f1_sd" in p else "")
                )
                cells.append(ppl + f1)
            lines.append(
                f"| {point['n_removed']} ({100 * point['fraction_removed']:.0f}%) | " + " | ".join(cells) + " |"
            )
        lines.append("")
    return lines


def gates_table(models: dict, keys: list[str]) -> list[str]:
    """The hard-concrete gate section of docs/results/heads/study.md."""
    lines = []
    lines += [
        "## Hard-concrete gates (`train --model --head-gates --gate-l0 λ`)",
        "",
        "| model | λ | heads kept (per layer) | perplexity | sentence F1 | valid loss gated → pruned |",
        "|---|---|---|---|---|---|",
    ]
    for key in keys:
        m = models[key]
        for g in m["gates"]:
            silenced = f", silenced {g['silenced']}" if g["silenced"] else ""
            lines.append(
                f"| {m['label']} | {g['gate_l0']:g} | {g['n_kept']}/{g['n_heads']} {g['kept_per_layer']}"
                f"{silenced} | {_fmt(g['perplexity'])} | {_fmt(g.get('sentence_f1'), '.2f')} | "
                f"{_fmt(g['valid_loss_gated'], '.3f')} → {_fmt(g['valid_loss_pruned'], '.3f')} |"
            )
    return lines


def markdown(summary: dict) -> str:
    models = summary["models"]
    keys = list(models)
    lines = [
        "# Attention heads: Tree Transformer vs plain Transformer vs StructFormer",
        "",
        "Written by `benchmarks/studies/heads/head_study.py`; numbers in `records/heads/head-study.json`. "
        f"Data: {summary['data']}. Seed {summary['seed']}.",
        "",
        f"- perplexity: {summary['protocol']['perplexity']}",
        f"- F1: {summary['protocol']['f1']}",
        f"- importance: {summary['protocol']['importance']}",
        f"- gates: {summary['protocol']['gates']}",
        "",
        "![head study](head-study.png)",
        "",
        "## The models and their heads",
        "",
        "| | " + " | ".join(models[k]["label"] for k in keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    rows = [
        ("prior / preset", lambda m: f"{m['prior'] or '–'} / {m['preset']}"),
        ("steps (train minutes, device)", lambda m: f"{m['steps']:,} ({m['train_minutes']:.1f}, {m['device']})"),
        ("parameters", lambda m: f"{m['parameters']:,}"),
        ("heads", lambda m: f"{m['layers']} × {m['heads_per_layer']}"),
        ("held-out perplexity (one mask per input)", lambda m: _fmt(m["curves"]["importance"][0]["perplexity"])),
        ("sentence F1, ptb-sample:dev", lambda m: _fmt(m["curves"]["importance"][0].get("sentence_f1"), ".2f")),
        ("importance: top quarter of heads holds (%)", lambda m: _fmt(m["importance"]["top_quarter_share"])),
        ("importance: Gini (0 = even)", lambda m: _fmt(m["importance"]["gini"], ".3f")),
        ("importance: largest / median head", lambda m: _fmt(m["importance"]["max_over_median"], ".2f")),
        (
            "positional heads (≥ 90% on −1 / +1)",
            lambda m: (
                f"{m['roles']['positional']} "
                f"({m['roles']['positional_previous']} prev, "
                f"{m['roles']['positional_next']} next)"
            ),
        ),
        (
            "syntactic heads (≥ 10 points over baseline), per source",
            lambda m: ", ".join(f"{Path(s).name}: {n}" for s, n in m["roles"]["syntactic"].items()) or "0",
        ),
        (
            "best 'attends to its head' on ptb-sample:dev (baseline)",
            lambda m: (
                f"{m['roles']['ptb_attends_to_head_best']:.1f} ({m['roles']['ptb_attends_to_head_baseline']:.1f})"
            ),
        ),
    ]
    for name, cell in rows:
        lines.append(f"| {name} | " + " | ".join(cell(models[k]) for k in keys) + " |")
    lines += pruning_curves(models, keys)
    lines += gates_table(models, keys)
    return "\n".join(lines) + "\n"


def figure(summary: dict):
    """Importance distribution; perplexity and F1 against heads removed (importance order, random,
    gates)."""
    import matplotlib.pyplot as plt

    import syntaxformer.figures  # noqa: F401  (Agg backend)

    models = summary["models"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    colours = dict(zip(models, ("tab:green", "tab:gray", "tab:purple")))
    ax = axes[0]
    for key, m in models.items():
        shares = m["importance"]["shares"]
        ax.plot(
            range(1, len(shares) + 1),
            [100 * s for s in shares],
            marker="o",
            markersize=3,
            color=colours[key],
            label=f"{m['label']} (Gini {m['importance']['gini']:.2f})",
        )
    ax.set_xlabel("heads, most important first")
    ax.set_ylabel("share of total importance (%)")
    ax.set_title("importance distribution (raw |dL/dξ|)", fontsize=9)
    for ax, name, label in (
        (axes[1], "perplexity", "masked-LM perplexity (one mask per input)"),
        (axes[2], "sentence_f1", "sentence F1 (%), ptb-sample:dev"),
    ):
        for key, m in models.items():
            if name not in m["curves"]["importance"][0]:
                continue
            for order, style in (("importance", "-"), ("random", ":")):
                points = m["curves"][order]
                xs = [100 * p["fraction_removed"] for p in points]
                ax.plot(
                    xs,
                    [p[name] for p in points],
                    style,
                    marker="o",
                    markersize=3,
                    color=colours[key],
                    label=f"{m['label']}, {m['curve_labels'][order]}",
                )
            gates = [g for g in m["gates"] if name in g]
            values = ", ".join(format(g["gate_l0"], "g") for g in gates)
            ax.scatter(
                [100 * (1 - g["n_kept"] / g["n_heads"]) for g in gates],
                [g[name] for g in gates],
                marker="*",
                s=90,
                color=colours[key],
                edgecolor="black",
                linewidth=0.5,
                zorder=3,
                label=f"{m['label']}, gates (λ {values})",
            )
        if name == "perplexity":
            ax.set_yscale("log")
        ax.set_xlabel("heads removed (%)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    axes[0].grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{summary['study']}; seed {summary['seed']}", fontsize=9)
    fig.tight_layout()
    return fig


def stage_report(work: Path, root: Path, lambdas, args) -> dict:
    """Write the study's record ``records/heads/head-study.json``, its page ``docs/results/heads/study.md`` and
    the figure the page shows (``docs/results/heads/head-study.{png,svg}``), under ``root``."""
    from syntaxformer.figures import save_figure

    summary = portable(summarise(work, lambdas, args))
    records, page = root / "records" / "heads", root / "docs" / "results" / "heads"
    records.mkdir(parents=True, exist_ok=True)
    page.mkdir(parents=True, exist_ok=True)
    (records / "head-study.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    save_figure(figure(summary), page / "head-study")
    (page / "study.md").write_text(markdown(summary))
    return summary


# --------------------------------------------------------------------------------------------------


def model_jobs(argv: list[str], args, stages: list[str]) -> list[Job]:
    """Each model's ``stages`` as one job (this script with ``--models KEY --jobs 1``), logging to
    ``WORK/KEY.log``."""
    return [
        Job(
            key,
            module_command(__spec__.name, *passed_on(argv), "--models", key, "--jobs", "1", "--stages", *stages),
            log=args.work / f"{key}.log",
        )
        for key in args.models
    ]


def run_parallel(argv: list[str], args, stages: list[str]) -> None:
    """Each model's ``stages`` in its own process, at most ``args.jobs`` at a time (the job runner).

    Raises:
        RuntimeError: a process failed (its log names the error).
    """
    failed = run_jobs(model_jobs(argv, args, stages), args.jobs, args.dry_run)
    if failed:
        raise RuntimeError(f"failed: {', '.join(failed)} (see {args.work}/<model>.log)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "head-study", help="models and per-model outputs")
    p.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="where records/heads/ and docs/results/heads/ go (default: the repository)",
    )
    p.add_argument("--device", default=None, help="cpu, cuda (default: cuda if available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=None, help="override the recipes' steps (a quick check)")
    p.add_argument("--gate-steps", type=int, default=GATE_STEPS, help="fine-tuning steps of each gate run")
    p.add_argument("--lambdas", type=float, nargs="+", default=list(LAMBDAS))
    p.add_argument(
        "--max-sentences",
        type=int,
        default=None,
        help="at most this many sentences of the held-out / dependency texts (a quick check)",
    )
    p.add_argument("--prune-step", type=float, default=PRUNE_STEP, help="prune --step")
    p.add_argument("--prune-seeds", type=int, default=3, help="prune --seeds (the random control)")
    p.add_argument("--ud-ewt", type=Path, default=UD_EWT_DEV, help="UD-EWT dev (CoNLL-U) for the syntactic roles")
    p.add_argument("--models", nargs="+", default=list(STUDY), choices=list(STUDY))
    p.add_argument(
        "--stages",
        nargs="+",
        default=["train", "heads", "prune", "gates", "report"],
        choices=["train", "heads", "prune", "gates", "report"],
    )
    add_job_options(p, "run the models' stages in this many parallel processes (e.g. 3 on one GPU), then the report")
    return p


def run_model(key: str, args) -> None:
    """The work stages of ``args.stages`` for one model, in this process."""
    if "train" in args.stages:
        stage_train(key, args.work, args.seed, args.device, args.max_steps, args.threads)
    if "heads" in args.stages:
        stage_heads(key, args.work, args.seed, args.device, args.max_sentences, args.ud_ewt)
    if "prune" in args.stages:
        stage_prune(
            key,
            args.work,
            args.seed,
            args.device,
            args.max_sentences,
            args.max_steps,
            args.prune_step,
            args.prune_seeds,
        )
    if "gates" in args.stages:
        stage_gates(
            key,
            args.work,
            args.seed,
            args.device,
            args.lambdas,
            args.gate_steps,
            args.max_sentences,
            args.max_steps,
            args.threads,
        )


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work_stages = [stage for stage in args.stages if stage != "report"]
    if args.dry_run:  # the jobs --jobs would run, one per model
        run_parallel(argv if argv is not None else sys.argv[1:], args, work_stages)
        return 0
    from syntaxformer.runtime import prepare_process

    prepare_process()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    start = time.monotonic()
    if args.jobs > 1 and len(args.models) > 1 and work_stages:
        run_parallel(argv if argv is not None else sys.argv[1:], args, work_stages)
        work_stages = []
    for key in args.models if work_stages else []:
        run_model(key, args)
        logger.info("%s done (%.1f min so far)", key, (time.monotonic() - start) / 60)
    if "report" in args.stages:
        summary = stage_report(args.work, args.root, args.lambdas, args)
        print(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
