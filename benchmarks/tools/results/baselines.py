"""``docs/results/baselines.md``: the structure-free baselines (left- and right-branching, random and
balanced trees) on all of ptb-sample and on its test half (``baselines``), and the left and right chains'
dependency scores (``baselines-dependencies``).

Data: ``records/baselines/baselines-ptb-sample.json`` and ``records/baselines/baselines-ptb-sample-test.json``
(``syntaxformer baselines --json``).
"""

from __future__ import annotations

from benchmarks.tools.results.core import load, markdown, table


@table("baselines")
def baselines() -> str:
    """Structure-free baselines on all of ptb-sample and on its test half."""
    rows = []
    for path, part in (
        ("records/baselines/baselines-ptb-sample.json", "all"),
        ("records/baselines/baselines-ptb-sample-test.json", "test"),
    ):
        report = load(path)
        for name in ("left_branching", "right_branching", "random", "balanced"):
            b = report[name]
            sd = b.get("std", {})
            cell = (lambda f: f"{b[f]:.2f} ± {sd[f]:.2f}") if sd else (lambda f: f"{b[f]:.2f}")
            label = name.replace("_", "-") + (
                f" (seeds {report['meta']['seeds'][0]}–{report['meta']['seeds'][-1]})" if sd else ""
            )
            rows.append(
                [
                    f"{part} ({report['meta']['n_sentences']:,})",
                    label,
                    cell("sentence_f1"),
                    cell("corpus_f1"),
                    cell("wsj10_sentence_f1"),
                    cell("wsj10_corpus_f1"),
                    f"{b['mean_depth']:.2f}",
                ]
            )
    return markdown(
        ["ptb-sample", "baseline", "sentence F1", "corpus F1", "WSJ-10 sentence F1", "WSJ-10 corpus F1", "mean depth"],
        rows,
        "llrrrrr",
    )


@table("baselines-dependencies")
def baselines_dependencies() -> str:
    rows = []
    for path in ("records/baselines/baselines-ptb-sample.json", "records/baselines/baselines-ptb-sample-test.json"):
        report = load(path)
        dep = report["dependency"]
        rows += [
            [
                report["meta"]["treebank"],
                chain.replace("_", " "),
                f"{dep[chain]['uas']:.2f}",
                f"{dep[chain]['uuas']:.2f}",
            ]
            for chain in ("left_chain", "right_chain")
        ]
    return markdown(["treebank", "baseline", "UAS", "UUAS"], rows, "llrr")
