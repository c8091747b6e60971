"""``docs/results/induce.md``: the tables over the induce groups (``records/induce/manifest.json``): every group
on the test half (``induce-test``), sentence F1 on the three parts (``induce-parts``, and
``induce-history`` for superseded code), the main job's candidates on the dev half (``induce-main-job``),
label recall (``induce-labels``), StructFormer's dependency trees (``induce-dependencies``) and its
``--recipe paper`` runs side by side (``induce-structformer-paper``), the ON-LSTM's single layers
(``induce-on-lstm-layers``, ``induce-on-lstm-paper-layers``), and the papers' published numbers
(``induce-published``, from ``records/papers/papers.json``).

Data: the groups' reports (``records/induce/*.json``, the shipped parsers'
``syntaxformer/pretrained/NAME/report.json``), read by :func:`~benchmarks.tools.results.core.group`. The
tables over epochs and seeds of the ``--recipe paper`` runs are :mod:`benchmarks.tools.results.induce_paper`'s.
"""

from __future__ import annotations

from benchmarks.tools.results.core import (
    compute,
    group,
    group_label,
    load,
    markdown,
    mean_sd,
    part_scores,
    seeds_of,
    table,
)

#: the recipes' seeded groups (three seeds, the bf16 run one) on ptb-sample or the ptb-lm text, in the tables' order
SEEDED_GROUPS = (
    "tt-wikitext",
    "tt-default",
    "tt-default-bf16",
    "tt-3500",
    "sf-default",
    "tt-long",
    "sf-long",
    "tt-12000",
    "sf-12000",
)


#: groups of superseded code (another random stream of the same recipe), in the history below the tables
HISTORY_GROUPS = ("tt-default-foreach", "tt-default-before")

#: the groups of the test-half table, after :data:`SEEDED_GROUPS`, in its order
TEST_GROUPS = (
    "sf-small-8000",
    "sf-paper-cpu",
    "sf-paper-cpu-seeds",
    "sf-paper-cpu-42ep",
    "sf-paper-cpu-longer",
    "sf-paper-cpu-100ep",
    "tt-b256-3500",
    "tt-b256-4500",
    "tt-b512-4500",
    "tt-b1024",
    "tt-paper-cpu",
    "tt-paper-cpu-dev-decoder",
    "on-lstm",
    "on-lstm-paper-cpu",
    "on-lstm-paper-cpu-longer",
    "on-lstm-paper-cpu-30ep",
    "shipped-on-lstm",
    "shipped-lm",
    "shipped-sf",
    "shipped-distilled",
    "shipped-cpcfg",
    "sf-small-8000-cpu",
    "shipped",
)


def _group_row(key: str, second: tuple[str, str]) -> list[str]:
    """An induce group's row: label, seeds, test sentence F1 (bold), ``second`` (part, field: a second F1
    column), WSJ-10 and the untrained model on the test half, right-branching, the training."""
    reps = group(key)
    return [
        group_label(key),
        seeds_of(reps),
        f"**{mean_sd(part_scores(reps, 'test'))}**",
        mean_sd(part_scores(reps, second[0], field=second[1])),
        mean_sd(part_scores(reps, "test", field="wsj10_sentence_f1")),
        mean_sd(part_scores(reps, "test", "untrained")),
        f"{reps[0]['parts']['test']['right_branching']['sentence_f1']:.2f}",
        compute(reps),
    ]


@table("induce-test")
def induce_test() -> str:
    """Every induce group on the test half: sentence, corpus and WSJ-10 F1, the untrained model, right-branching."""
    rows = [_group_row(key, ("test", "corpus_f1")) for key in (*SEEDED_GROUPS, *TEST_GROUPS)]
    on_lstm = group("on-lstm")
    layer2 = [r["parts"]["test"]["single_layer"]["2"] for r in on_lstm]
    rows.append(
        [
            "the same ON-LSTM models, layer 2 (`--layer 2`; the best layer on dev)",
            seeds_of(on_lstm),
            mean_sd(s["sentence_f1"] for s in layer2),
            mean_sd(s["corpus_f1"] for s in layer2),
            "",
            "",
            "",
            "",
        ]
    )
    first = group("tt-default")[0]["parts"]["test"]
    rows.append(
        [
            "balanced binary / random binary trees",
            "",
            f"{first['balanced']['sentence_f1']:.2f} / {first['random']['sentence_f1']:.2f}",
            "",
            "",
            "",
            "",
            "",
        ]
    )
    return markdown(
        [
            "ptb-sample **test** half (1,993 sentences)",
            "seeds",
            "sentence F1",
            "corpus F1",
            "WSJ-10 sent. F1",
            "same model untrained",
            "right-branching",
            "training",
        ],
        rows,
        "llrrrrrl",
    )


#: the PCFGs' groups (Kim, Dyer & Rush 2019 at the ``cpu`` recipe), in the PCFG table's order
PCFG_GROUPS = ("cpcfg-cpu10", "npcfg-cpu10", "npcfg-cpu")


@table("induce-pcfg")
def induce_pcfg() -> str:
    """The Neural and Compound PCFGs: sentence F1 on the test and dev halves, WSJ-10, the untrained grammar,
    right-branching, and the training."""
    rows = [_group_row(key, ("dev", "sentence_f1")) for key in PCFG_GROUPS]
    header = ["PCFG", "seeds", "test sentence F1", "dev sentence F1", "WSJ-10 (test)", "untrained (test)"]
    return markdown([*header, "right-branching (test)", "training"], rows, "llrrrrrl")


@table("induce-parts")
def induce_parts() -> str:
    """Sentence F1 per seed and on the three parts (test, dev, all of ptb-sample)."""
    return parts_table((*SEEDED_GROUPS, "on-lstm"))


@table("induce-history")
def induce_history() -> str:
    """The same for the groups of superseded code (:data:`HISTORY_GROUPS`), with their training."""
    return parts_table(HISTORY_GROUPS, with_training=True)


def parts_table(keys, with_training: bool = False) -> str:
    """Sentence F1 of the groups ``keys``: per seed on the test half, and the means on test, dev and all."""
    rows = []
    for key in keys:
        reps = group(key)
        per_seed = ", ".join(f"{v:.2f}" for v in part_scores(reps, "test"))
        row = [group_label(key), per_seed, *(mean_sd(part_scores(reps, p)) for p in ("test", "dev", "all"))]
        rows.append(row + [compute(reps)] if with_training else row)
    right = group("tt-default")[0]["parts"]
    rb = [f"{right[p]['right_branching']['sentence_f1']:.2f}" for p in ("test", "dev", "all")]
    rows.append(["right-branching", "", *rb] + ([""] if with_training else []))
    header = ["", "test, per seed", "test (1,993)", "dev (1,921)", "all (3,914)"]
    if with_training:
        return markdown(header + ["training"], rows, "lrrrrl")
    return markdown(header, rows, "lrrrr")


#: the candidates for the main job (``induce`` with no options), chosen on the dev half
MAIN_JOB_CANDIDATES = (
    "sf-main-sample-fast",
    "sf-main-sample-faster",
    "sf-main-sample-paper",
    "sf-main-embedded-paper",
    "tt-wikitext",
    "tt-default",
    "tt-3500",
)


def setting_cell(setting: str) -> str:
    """A report's ``data.setting`` in a few words: ``transductive``, plus the out-of-domain part if any."""
    short = setting.split(" (")[0]
    return short + ("; WikiText-2 out of domain" if "WikiText-2" in setting else "")


@table("induce-main-job")
def induce_main_job() -> str:
    """The main job's candidates: dev-half sentence F1 (the choice), test half, training minutes, against
    right-branching on the same half."""
    rows = []
    for key in MAIN_JOB_CANDIDATES:
        reps = group(key)
        rows.append(
            [
                group_label(key),
                seeds_of(reps),
                f"**{mean_sd(part_scores(reps, 'dev'))}**",
                mean_sd(part_scores(reps, "test")),
                setting_cell(reps[0]["data"]["setting"]),
                compute(reps),
            ]
        )
    right = group("tt-default")[0]["parts"]
    rows.append(
        ["right-branching", "", *(f"{right[p]['right_branching']['sentence_f1']:.2f}" for p in ("dev", "test")), "", ""]
    )
    return markdown(
        ["candidate", "seeds", "dev sentence F1", "test sentence F1", "setting", "training"], rows, "llrrll"
    )


@table("induce-labels")
def induce_labels() -> str:
    """Label recall of the default Tree Transformer's seed-0 test trees, beside untrained and right-branching."""
    test = group("tt-wikitext")[0]["parts"]["test"]
    labels = list(test["tree_transformer"]["label_recall"])
    rows = [
        [name, *(f"{test[system]['label_recall'][label]:.1f}" for label in labels)]
        for name, system in (
            ("Tree Transformer, seed 0", "tree_transformer"),
            ("untrained", "untrained"),
            ("right-branching", "right_branching"),
        )
    ]
    rows.append(["gold constituents", *(f"{test['tree_transformer']['label_counts'][label]:,}" for label in labels)])
    return markdown(["recall (%), test half", *labels], rows, "l" + "r" * len(labels))


@table("induce-dependencies")
def induce_dependencies() -> str:
    """StructFormer's dependency trees on the test half (UAS / UUAS per seed) beside the chain baselines."""
    rows = []
    for key in ("sf-default", "sf-long", "sf-12000"):
        for r in group(key):
            dep = r["parts"]["test"]["dependency"]
            rows.append(
                [group_label(key), r["seed"], f"{dep['structformer']['uas']:.2f}", f"{dep['structformer']['uuas']:.2f}"]
            )
    dep = group("sf-default")[0]["parts"]["test"]["dependency"]
    for chain in ("left_chain", "right_chain"):
        rows.append([chain.replace("_", " "), "", f"{dep[chain]['uas']:.2f}", f"{dep[chain]['uuas']:.2f}"])
    return markdown(["test half, punctuation excluded", "seed", "UAS", "UUAS"], rows, "lrrr")


@table("induce-structformer-paper")
def induce_structformer_paper() -> str:
    """StructFormer trained by its authors' procedure (``--recipe paper``: a first run of seed 0, then seeds 0,
    1 and 2 for 26, 42, 58 and 100 epochs, seed 0's 100-epoch run shipped) beside the long
    recipe at the same size and the StructFormer shipped before them: dev and test sentence F1, test UAS (each
    with its own decoder)."""
    rows = []
    for key in (
        "sf-paper-cpu",
        "sf-paper-cpu-seeds",
        "sf-paper-cpu-42ep",
        "sf-paper-cpu-longer",
        "sf-paper-cpu-100ep",
        "shipped-sf",
        "sf-long",
        "sf-small-8000-cpu",
    ):
        reps = group(key)
        uas = [r["parts"]["test"]["dependency"]["structformer"]["uas"] for r in reps]
        rows.append(
            [
                group_label(key),
                seeds_of(reps),
                f"**{mean_sd(part_scores(reps, 'dev'))}**",
                mean_sd(part_scores(reps, "test")),
                mean_sd(uas),
                reps[0]["decoder"].get("dependency", "mst"),
                compute(reps),
            ]
        )
    parts = group("sf-paper-cpu")[0]["parts"]
    chain = parts["test"]["dependency"]["left_chain"]["uas"]
    rows.append(
        [
            "right-branching (UAS: left chain)",
            "",
            f"{parts['dev']['right_branching']['sentence_f1']:.2f}",
            f"{parts['test']['right_branching']['sentence_f1']:.2f}",
            f"{chain:.2f}",
            "",
            "",
        ]
    )
    return markdown(
        ["StructFormer", "seeds", "dev sentence F1", "test sentence F1", "test UAS", "heads", "training"],
        rows,
        "llrrrll",
    )


@table("induce-on-lstm-layers")
def induce_on_lstm_layers() -> str:
    """The ON-LSTM's test sentence F1 from each single layer, and its untrained twin (the default recipe)."""
    return on_lstm_layers("on-lstm")


@table("induce-on-lstm-paper-layers")
def induce_on_lstm_paper_layers() -> str:
    """The same for the ON-LSTM trained with the paper's procedure (``--recipe paper``)."""
    return on_lstm_layers("on-lstm-paper-cpu")


def on_lstm_layers(key: str) -> str:
    """Test and dev sentence F1 of each single layer of the ON-LSTM group ``key``, and its untrained twin."""
    reps = group(key)
    layers = sorted(reps[0]["parts"]["test"]["single_layer"], key=int)
    rows = [
        [
            f"layer {layer}",
            *(f"{r['parts']['test']['single_layer'][layer]['sentence_f1']:.2f}" for r in reps),
            mean_sd([r["parts"]["test"]["single_layer"][layer]["sentence_f1"] for r in reps]),
            mean_sd([r["parts"]["dev"]["single_layer"][layer]["sentence_f1"] for r in reps]),
        ]
        for layer in layers
    ]
    rows.append(
        [
            "untrained, layer 1",
            *(f"{v:.2f}" for v in part_scores(reps, "test", "untrained")),
            mean_sd(part_scores(reps, "test", "untrained")),
            mean_sd(part_scores(reps, "dev", "untrained")),
        ]
    )
    return markdown(
        ["ON-LSTM, sentence F1", *(f"seed {r['seed']}" for r in reps), "test", "dev"], rows, "l" + "r" * (len(reps) + 2)
    )


@table("induce-published")
def induce_published() -> str:
    """The papers' published numbers (``records/papers/papers.json``): each one's model, the sentences it was
    scored on, sentence F1 as printed in its source, right-branching on WSJ test and the training compute."""
    papers = load("records/papers/papers.json")
    right = f"{papers['right_branching']['sentence_f1']:.1f}"
    rows = [
        [p["model"], p["data"], "–".join(str(v) for v in p["sentence_f1"]), right, p["compute"]] for p in papers["rows"]
    ]
    return markdown(["published", "sentences", "sentence F1", "right-branching", "training compute"], rows, "llrrl")
