"""``docs/results/induce.md``: the ``--recipe paper`` runs over epochs and seeds: StructFormer's seeds
(``induce-structformer-paper-seeds``) and its runs continued toward the authors' 100 epochs
(``induce-structformer-paper-longer``, ``-58``, ``-100``), the Tree Transformer's runs
(``induce-tree-transformer-paper``), the ON-LSTM's runs for 18 and 30 epochs (``induce-on-lstm-paper-longer``,
``induce-on-lstm-paper-30``): each run's dev sentence F1 along its learning curve, beside the run it continues
(:func:`shorter_twin`).

Data: the groups' reports (``records/induce/manifest.json``'s groups, read by
:func:`~benchmarks.tools.results.core.group`): their learning curves (``curve.points``), their parts' scores
and their training; the shipped parsers' reports mark the run each comes from.
"""

from __future__ import annotations

from benchmarks.tools.results.core import compute, group, markdown, mean_sd, part_scores, seeds_of, table
from syntaxformer.evaluation.curve import curve_decoder_name


def is_shipped(report: dict, shipped: dict) -> bool:
    """Whether ``report`` is the run the shipped parser's report comes from (its seed and its steps)."""
    return (report["seed"], report["training"]["steps"]) == (shipped["seed"], shipped["training"]["steps"])


#: the epochs at which the seeds' dev curves are compared (the paper recipe validates after every epoch)
SEED_EPOCHS = (5, 10, 15, 20)


def dev_by_epoch(report: dict) -> dict[int, float]:
    """A run's dev sentence F1 after each whole epoch, from its learning curve: its one decoder's, or where
    the curve scores several (the ON-LSTM's layers), the report's decoder's (``curve_decoder_name``). A
    running-text run (the ON-LSTM's paper recipe) validates at each epoch's end, at a step that varies with
    its window lengths: its epochs are counted by the tokens seen."""
    training = report["training"]
    running = training.get("running_text")
    per_epoch = round(training["steps"] / training["epochs"])
    curve = {}
    for point in report["curve"]["points"]:
        if running:
            epoch = round(point["tokens_seen"] / (running["rows"] * running["tokens_per_row"]))
        elif point["step"] % per_epoch == 0:
            epoch = point["step"] // per_epoch
        else:
            continue
        scores = point["scores"]
        (score,) = scores.values() if len(scores) == 1 else [scores[curve_decoder_name(report["decoder"], scores)]]
        curve[epoch] = score["sentence_f1"]
    return curve


@table("induce-structformer-paper-seeds")
def induce_structformer_paper_seeds() -> str:
    """StructFormer's ``--recipe paper`` over seeds: each run's dev sentence F1 after 5, 10, 15, 20 epochs and
    at the last epoch every run reached, then where each stopped (the lowest-validation-loss model's dev and
    test F1); the mean ± sd over the three seeds trained for 26 epochs."""
    shipped = group("shipped-sf")[0]
    seeds = group("sf-paper-cpu-seeds")
    runs = [("first run, 27.1 epochs", r) for r in group("sf-paper-cpu")]
    runs += [("shipped" if is_shipped(r, shipped) else "", r) for r in seeds]
    curves = [dev_by_epoch(r) for _, r in runs]
    common = min(max(c) for c in curves)
    epochs = [e for e in SEED_EPOCHS if e < common] + [common]
    rows = [
        [
            f"{r['seed']}" + (f" ({label})" if label else ""),
            *(f"{c[e]:.2f}" for e in epochs),
            f"{part_scores([r], 'dev')[0]:.2f}",
            f"**{part_scores([r], 'test')[0]:.2f}**",
            compute([r]),
        ]
        for (label, r), c in zip(runs, curves)
    ]
    seed_curves = curves[-len(seeds) :]
    rows.append(
        [
            f"seeds {seeds_of(seeds)}",
            *(mean_sd([c[e] for c in seed_curves]) for e in epochs),
            mean_sd(part_scores(seeds, "dev")),
            f"**{mean_sd(part_scores(seeds, 'test'))}**",
            "",
        ]
    )
    header = ["seed", *(f"dev, epoch {e}" for e in epochs), "dev F1", "test F1", "training"]
    return markdown(header, rows, "l" + "r" * (len(epochs) + 2) + "l")


#: the epochs at which the longer runs' dev curves are compared, from where the three-seed runs stopped
LONGER_EPOCHS = (26, 30, 34, 38)


@table("induce-structformer-paper-longer")
def induce_structformer_paper_longer() -> str:
    """The 42-epoch runs toward the authors' 100 epochs: each run's dev sentence F1 after 26, 30, 34, 38
    epochs and at the last epoch all reached, then the kept (lowest validation loss) model's dev and test F1
    (beside a 26-epoch twin's test F1 where a run continues one, :func:`longer_runs`); the mean ± sd."""
    return longer_runs("sf-paper-cpu-42ep", "sf-paper-cpu-seeds", "shipped-sf", LONGER_EPOCHS)


@table("induce-structformer-paper-58")
def induce_structformer_paper_58() -> str:
    """The 42-epoch runs continued with ``--resume`` to 58 epochs: each run's dev sentence F1 after 42, 46, 50,
    54 epochs and at the last epoch all reached, the kept (lowest validation loss) model's dev and test F1
    beside the same run's at 42 epochs; the mean ± sd over the runs."""
    return longer_runs("sf-paper-cpu-longer", "sf-paper-cpu-42ep", "shipped-sf", (42, 46, 50, 54))


@table("induce-structformer-paper-100")
def induce_structformer_paper_100() -> str:
    """The ``--recipe paper`` runs continued with ``--resume`` to the authors' 100 epochs (seeds 1 and 2 from
    58 epochs, seed 0 from 42): each run's dev sentence F1 after 58, 66, 74, 82, 90 epochs and at the last
    epoch all reached, the kept (lowest validation loss) model's dev and test F1 beside the same run's at 58
    epochs where the table can pair it; the mean ± sd over the runs."""
    return longer_runs("sf-paper-cpu-100ep", "sf-paper-cpu-longer", "shipped-sf", (58, 66, 74, 82, 90))


def longer_runs(key: str, shorter_key: str, shipped_key: str, at_epochs: tuple[int, ...]) -> str:
    """Runs of group ``key``, longer than those of ``shorter_key``: each run's dev sentence F1 after
    ``at_epochs`` and at the last epoch all reached, the kept model's dev and test F1 beside its shorter
    twin's test F1 (the run it continues, :func:`shorter_twin`; "–" where there is none; no such column when
    no run has one), its compute; then, for more than one run, the mean ± sd over the runs (the twins' over the seeds
    that have one). The run the shipped parser of ``shipped_key`` comes from is marked."""
    longer = group(key)
    shipped = group(shipped_key)[0]
    twins = [shorter_twin(r, group(shorter_key)) for r in longer]
    continued = [twin for twin in twins if twin]
    curves = [dev_by_epoch(r) for r in longer]
    common = min(max(c) for c in curves)
    epochs = [e for e in at_epochs if e < common] + [common]
    rows = [
        [
            f"{r['seed']}" + (" (shipped)" if is_shipped(r, shipped) else ""),
            *(f"{c[e]:.2f}" for e in epochs),
            f"{part_scores([r], 'dev')[0]:.2f}",
            f"**{part_scores([r], 'test')[0]:.2f}**",
            *([f"{part_scores([twin], 'test')[0]:.2f}" if twin else "–"] if continued else []),
            compute([r]),
        ]
        for r, c, twin in zip(longer, curves, twins)
    ]
    twin_mean = []  # the twins' mean test F1: a cell where any run has a twin
    if continued:
        partial = f" (seeds {seeds_of(continued)})" if len(continued) < len(longer) else ""
        twin_mean = [mean_sd(part_scores(continued, "test")) + partial]
    if len(longer) > 1:  # one run has no mean row
        rows.append(
            [
                f"seeds {seeds_of(longer)}",
                *(mean_sd([c[e] for c in curves]) for e in epochs),
                mean_sd(part_scores(longer, "dev")),
                f"**{mean_sd(part_scores(longer, 'test'))}**",
                *twin_mean,
                "",
            ]
        )
    header = ["seed", *(f"dev, epoch {e}" for e in epochs), "dev F1", "test F1"]
    if continued:  # a twin stopped by time may run past its planned epochs: the shortest twin's last epoch
        header.append(f"test F1 at {min(max(dev_by_epoch(twin)) for twin in continued)} epochs")
    header.append("training")
    return markdown(header, rows, "l" + "r" * (len(header) - 2) + "l")


@table("induce-tree-transformer-paper")
def induce_tree_transformer_paper() -> str:
    """The Tree Transformer's ``--recipe paper`` runs on the CPU: each run's dev sentence F1 at the
    learning-curve points every run reached (at most five, evenly spaced back from the last), by Algorithm 1
    from the recipe's minimum layer (2) under the paper's rule (or with the descend rule, where a run's curve
    scores it), then at its last step (no selection: the model it ends with) the curve's Algorithm 1 from
    layer 0 (the other recipes' decoder) and the recipe decoder's (with the descend rule) dev and test F1;
    the mean ± sd over the seeds."""
    runs = group("tt-paper-cpu")
    curves = [{p["step"]: p["scores"] for p in r["curve"]["points"]} for r in runs]
    steps = sorted(set.intersection(*(set(c) for c in curves)) - {0})
    steps = steps[::-1][:: -(-len(steps) // 5)][::-1]  # at most 5 columns, the last common point kept
    name = curve_decoder_name(runs[0]["decoder"], curves[0][0])
    dev = [[c[s][name]["sentence_f1"] for s in steps] for c in curves]
    layer0 = [c[max(c)]["algorithm1_m0"]["sentence_f1"] for c in curves]
    rows = [
        [
            f"{r['seed']}",
            *(f"{v:.2f}" for v in d),
            f"{m0:.2f}",
            f"{part_scores([r], 'dev')[0]:.2f}",
            f"**{part_scores([r], 'test')[0]:.2f}**",
            compute([r]),
        ]
        for r, d, m0 in zip(runs, dev, layer0)
    ]
    if len(runs) > 1:
        rows.append(
            [
                f"seeds {seeds_of(runs)}",
                *(mean_sd(column) for column in zip(*dev)),
                mean_sd(layer0),
                mean_sd(part_scores(runs, "dev")),
                f"**{mean_sd(part_scores(runs, 'test'))}**",
                "",
            ]
        )
    header = ["seed", *(f"dev, step {s:,}" for s in steps), "dev, from layer 0, last step", "dev F1", "test F1"]
    return markdown([*header, "training"], rows, "l" + "r" * len(header[1:]) + "l")


def shorter_twin(report: dict, shorter: list[dict]) -> dict | None:
    """The run of ``shorter`` (induce reports) that ``report`` is the continuation of: the same seed, and
    either ``report`` was resumed from its last step (``training.resumed_from_steps``) or ``report``'s dev
    curve repeats every point of its curve exactly (the same training run again, from the start).

    Returns:
        That report, or None for any other run (e.g. one whose arithmetic parted from it on another
        machine, or a seed with no shorter run).
    """
    resumed = report["training"].get("resumed_from_steps") or []
    points = {p["step"]: p["scores"] for p in report.get("curve", {}).get("points", [])}
    for run in shorter:
        if run["seed"] != report["seed"]:
            continue
        curve = run.get("curve", {}).get("points", [])
        if run["training"]["steps"] in resumed or (curve and all(points.get(p["step"]) == p["scores"] for p in curve)):
            return run
    return None


@table("induce-on-lstm-paper-longer")
def induce_on_lstm_paper_longer() -> str:
    """The ON-LSTM's ``--recipe paper`` runs for 18 epochs (continued from the 8-epoch ones or run again):
    dev F1 after 8, 10, 12, 14, 16 epochs and at the last all reached, the kept (best validation
    perplexity) model's dev and test F1."""
    return longer_runs("on-lstm-paper-cpu-longer", "on-lstm-paper-cpu", "shipped-on-lstm", (8, 10, 12, 14, 16))


@table("induce-on-lstm-paper-30")
def induce_on_lstm_paper_30() -> str:
    """The ON-LSTM's ``--recipe paper`` runs continued from 18 to 30 epochs: dev F1 after 18, 20, 22, 24, 26,
    28 epochs and at the last all reached, the kept model's dev and test F1 beside the same run's at 18."""
    return longer_runs(
        "on-lstm-paper-cpu-30ep", "on-lstm-paper-cpu-longer", "shipped-on-lstm", (18, 20, 22, 24, 26, 28)
    )
