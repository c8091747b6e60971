"""``syntaxformer compare --max-minutes``: the Tree Transformer trains until the time
cap, the two Transformers then train for exactly the steps it reached, and the report says so.

The clock is the test's own (the ``step_clock`` fixture of conftest.py): 0.7 s a step, so a cap of 0.05
minutes (3 s) is passed by step 5 (3.5 s; step 4 is at 2.8 s)."""

from __future__ import annotations

import json
from pathlib import Path

from syntaxformer.cli import main
from syntaxformer.data.corpus import load_corpus


def test_compare_stops_the_tree_transformer_by_the_time_cap(tmp_path: Path, step_clock, capsys):
    sentences = load_corpus("ptb-sample:dev")
    train_file, test_file = tmp_path / "train.txt", tmp_path / "test.txt"
    train_file.write_text("\n".join(" ".join(s) for s in sentences[:200]) + "\n")
    test_file.write_text("\n".join(" ".join(s) for s in sentences[200:215]) + "\n")

    out = tmp_path / "compare"
    argv = ["compare", "--corpus", str(train_file), "--test", str(test_file), "--preset", "tiny"]
    argv += ["--max-minutes", "0.05", "--batch-size", "16", "--out", str(out), "--seed", "1", "--threads", "1"]
    assert main([*argv, "--device", "cpu", "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)

    assert report["steps"] == 5
    assert report["stop"] == "max_minutes 0.05 (Tree Transformer), then its 5 steps for all"
    assert report == json.loads((out / "compare.json").read_text())
    names = [run["name"] for run in report["runs"]]
    assert names[:2] == ["tree-transformer", "transformer"] and names[2].startswith("transformer-L")
    assert [run["steps"] for run in report["runs"]] == [5, 5, 5]
    tree = json.loads((out / "tree-transformer" / "training.json").read_text())
    assert tree["stopped"] == "max_minutes" and tree["steps"] == 5
    assert tree["arguments"]["max_minutes"] == 0.05 and tree["minutes"] == round(3.5 / 60, 3)
    for name in names[1:]:
        record = json.loads((out / name / "training.json").read_text())
        assert record["stopped"] == "max_steps" and record["arguments"]["max_steps"] == 5
        assert record["arguments"]["max_minutes"] is None
    # every run was scored on the 15 test sentences
    assert {run["n_sentences"] for run in report["runs"]} == {15}
