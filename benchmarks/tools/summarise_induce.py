"""Mean ± sample sd over seeds of ``syntaxformer induce`` reports, as a markdown table.

    python -m benchmarks.tools.summarise_induce records/induce/tree-transformer-default-seed{0,1,2}.json

Per part (test, dev, all): the model's sentence / corpus F1 and WSJ-10 sentence F1, the untrained
(step-0) model with the same decoder, and right-branching; then the training steps and minutes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def mean_sd(values) -> str:
    values = list(values)
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", help="induce reports (report.json) of the same model and recipe")
    reports = [json.loads(open(p).read()) for p in parser.parse_args(argv).reports]
    name = reports[0]["model"].replace("-", "_")
    seeds = ", ".join(str(r["seed"]) for r in reports)
    print(f"{reports[0]['model']}, recipe {reports[0]['recipe']}, seeds {seeds}\n")
    print("| part | sentence F1 | corpus F1 | WSJ-10 sent. F1 | untrained (step 0) | right-branching |")
    print("|---|---|---|---|---|---|")
    for part in reports[0]["parts"]:
        rows = [r["parts"][part] for r in reports]
        print(
            f"| {part} | {mean_sd(x[name]['sentence_f1'] for x in rows)} | "
            f"{mean_sd(x[name]['corpus_f1'] for x in rows)} | "
            f"{mean_sd(x[name]['wsj10_sentence_f1'] for x in rows)} | "
            f"{mean_sd(x['untrained']['sentence_f1'] for x in rows)} | "
            f"{rows[0]['right_branching']['sentence_f1']:.2f} |"
        )
    print(
        "\nper seed (test sentence F1): "
        + ", ".join(
            f"{r['seed']}: {r['parts'].get('test', r['parts'].get('all'))[name]['sentence_f1']:.2f}" for r in reports
        )
    )
    print(
        "steps: "
        + ", ".join(str(r["training"]["steps"]) for r in reports)
        + "; minutes (train / total): "
        + ", ".join(f"{r['minutes']['train']} / {r['minutes']['total']}" for r in reports)
        + "; device: "
        + ", ".join(str(r["training"].get("device")) for r in reports)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
