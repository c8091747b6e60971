"""Learning curves and the dev/test halves of ptb-sample (DESIGN.md §7): the selectors, the fast
bracket scores against the full evaluator, ``train --eval-treebank`` and the step-0 control."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from syntaxformer.data import PRPN, GoldTrees, load_corpus, load_gold_trees, read_dependencies
from syntaxformer.data.embedded import ptb_sample_part
from syntaxformer.decoding.spans import brackets
from syntaxformer.errors import InputError
from syntaxformer.evaluation.baselines import balanced, baseline_trees, left_branching, random_binary, right_branching
from syntaxformer.evaluation.constituency import bracket_scores, evaluate_constituency
from syntaxformer.evaluation.curve import ParseCurve, curve_decoder_name
from syntaxformer.figures import plot_parse_curve
from syntaxformer.parsing import load_model
from syntaxformer.structures import DecoderOptions, LinkProbabilities
from syntaxformer.tasks.language_model import TrainArguments, initial_model
from syntaxformer.tasks.run import train

torch.set_num_threads(1)


def test_ptb_sample_halves_partition_the_sample(ptb_gold):
    dev, test = load_gold_trees("ptb-sample:dev"), load_gold_trees("ptb-sample:test")
    assert (len(dev), len(test)) == (1921, 1993)  # DESIGN.md §7
    assert [t.leaves() for t in dev] + [t.leaves() for t in test] == [t.leaves() for t in ptb_gold]
    joined = GoldTrees.joined(dev, test, "ptb-sample")  # what induce scores as the whole, not read again
    assert list(joined) == list(ptb_gold) and joined.numbers == ptb_gold.numbers == tuple(range(1, 3915))
    assert (joined.source, joined.skipped, joined.n_input) == (ptb_gold.source, ptb_gold.skipped, 3914)
    with pytest.raises(ValueError, match="different options"):
        GoldTrees.joined(dev, load_gold_trees("ptb-sample:test", replace(PRPN, lowercase=not PRPN.lowercase)), "x")
    assert [list(s.words) for s in read_dependencies("ptb-sample:test")][0] != [
        list(s.words) for s in read_dependencies("ptb-sample:dev")
    ][0]
    assert len(read_dependencies("ptb-sample:dev")) == 1921
    assert load_corpus("ptb-sample:test") == [t.leaves() for t in test]
    # DESIGN.md §7's right-branching references: dev 39.94, test 39.88
    for half, expected in ((dev, 39.94), (test, 39.88)):
        right = baseline_trees(half, right_branching)
        assert round(evaluate_constituency(right, half)["sentence_f1"], 2) == expected


def test_unknown_part_is_a_one_line_error():
    with pytest.raises(
        InputError, match="unknown part 'train' of ptb-sample: expected ptb-sample, ptb-sample:dev or ptb-sample:test"
    ):
        load_gold_trees("ptb-sample:train")
    assert ptb_sample_part("ptb-sample") == "all" and ptb_sample_part("some/file.mrg") is None


@pytest.mark.parametrize("kind", ["left", "balanced", "random"])
def test_bracket_scores_equal_the_evaluator(ptb_gold, kind):
    rng = random.Random(3)
    make = {"left": left_branching, "balanced": balanced, "random": lambda n: random_binary(n, rng)}[kind]
    trees = baseline_trees(ptb_gold, make)
    full = evaluate_constituency(trees, ptb_gold)
    fast = bracket_scores(
        [brackets(t) for t in trees], [brackets(g) for g in ptb_gold], [len(g.leaves()) for g in ptb_gold]
    )
    assert fast["sentence_f1"] == pytest.approx(full["sentence_f1"], abs=1e-9)
    assert fast["corpus_f1"] == pytest.approx(full["corpus_f1"], abs=1e-9)


def _flat(scores: dict) -> dict:
    return {(decoder, key): value for decoder, values in scores.items() for key, value in values.items()}


def test_train_records_the_curve_from_step_0(tmp_path):
    out = tmp_path / "run"
    args = TrainArguments(
        out=str(out),
        preset="tiny",
        max_steps=6,
        eval_every=4,
        save_every=0,
        eval_treebank="ptb-sample:dev",
        quiet=True,
        threads=1,
        device="cpu",
        overrides={"constituent_variant": "official"},
    )
    train(args)
    record = json.loads((out / "training.json").read_text())
    curve = record["parse_curve"]
    assert curve["treebank"] == "ptb-sample:dev" and curve["every"] == 4
    assert [p["step"] for p in curve["points"]] == [0, 4, 6]  # step 0, every 4 steps, the end
    assert curve["points"][0]["tokens_seen"] == 0 and curve["points"][-1]["tokens_seen"] > 0
    names = set(curve["points"][0]["scores"])
    algorithm1_names = {f"algorithm1_m{m}{rule}" for m in range(3) for rule in ("", "_descend")}
    assert names == algorithm1_names | {f"layer{m}" for m in range(3)}
    for point in curve["points"]:
        for scores in point["scores"].values():
            assert 0 <= scores["corpus_f1"] <= 100 and 0 <= scores["sentence_f1"] <= 100
    # the step-0 point is the untrained model that initial_model rebuilds from the same seed
    tokenizer = AutoTokenizer.from_pretrained(out)
    untrained = initial_model(args, len(tokenizer)).eval()
    again = ParseCurve("ptb-sample:dev")(untrained, tokenizer)
    assert _flat(again) == pytest.approx(_flat(curve["points"][0]["scores"]))
    # and the last point is the saved model
    model, _, _ = load_model(out)
    assert _flat(ParseCurve("ptb-sample:dev")(model, tokenizer)) == pytest.approx(_flat(curve["points"][-1]["scores"]))
    # TensorBoard has the curve too
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    steps = [e.step for e in events.Scalars("parse/algorithm1_m0/sentence_f1")]
    assert steps == [0, 4, 6]


def test_bad_eval_treebank_fails_before_training(tmp_path):
    with pytest.raises(InputError, match="absent.mrg"):
        train(
            TrainArguments(
                out=str(tmp_path / "o"),
                preset="tiny",
                max_steps=2,
                quiet=True,
                eval_treebank=str(tmp_path / "absent.mrg"),
            )
        )
    assert not (tmp_path / "o" / "model.safetensors").exists()


def test_curve_figure_draws_each_decoder_and_baseline():
    points = [
        {
            "step": s,
            "train_minutes": s / 10,
            "scores": {"algorithm1_m0": {"sentence_f1": 20.0 + s}, "layer0": {"sentence_f1": 22.0}},
        }
        for s in (0, 5, 10)
    ]
    fig = plot_parse_curve(points, ["algorithm1_m0", "layer0"], {"right-branching": 39.94})
    ax = fig.axes[0]
    assert [list(line.get_ydata()) for line in ax.lines[:2]] == [[20.0, 25.0, 30.0], [22.0, 22.0, 22.0]]
    assert list(ax.lines[2].get_ydata()) == [39.94, 39.94]
    with pytest.raises(ValueError, match="layer5"):
        plot_parse_curve(points, ["layer5"], {})


def test_the_curve_key_of_a_reports_decoder():
    """A single layer names its layer; otherwise the distance split where the curve has it, else Algorithm 1."""
    on_lstm = ["distance", "layer0", "layer1", "layer2"]
    tree_transformer = ["algorithm1_m0", "algorithm1_m1", "layer0", "layer1"]
    assert curve_decoder_name({"layer": 2, "min_layer": None}, on_lstm) == "layer2"
    assert curve_decoder_name({"layer": None, "min_layer": None}, on_lstm) == "distance"
    assert curve_decoder_name({"layer": None, "min_layer": 1}, tree_transformer) == "algorithm1_m1"
    assert curve_decoder_name({"layer": None, "min_layer": None}, tree_transformer) == "algorithm1_m0"
    # the public descend rule has its own key; a curve recorded without it falls back to the paper's rule
    descend = {"layer": None, "min_layer": 1, "descend_threshold": 0.7}
    assert curve_decoder_name(descend, [*tree_transformer, "algorithm1_m1_descend"]) == "algorithm1_m1_descend"
    assert curve_decoder_name(descend, tree_transformer) == "algorithm1_m1"


def test_the_curve_scores_algorithm1_with_and_without_the_descend_rule():
    """The hand case of test_decoding: the descend rule changes the tree, and each key gives its own."""
    links = LinkProbabilities(np.array([[0.50, 0.20, 0.05], [0.75, 0.78, 0.10]]))
    decoders = links.decoders()
    algorithm1_names = {f"algorithm1_m{m}{rule}" for m in (0, 1) for rule in ("", "_descend")}
    assert set(decoders) == algorithm1_names | {"layer0", "layer1"}
    assert decoders["algorithm1_m0"]() == {(0, 4), (0, 3), (1, 3)}
    assert decoders["algorithm1_m0_descend"]() == {(0, 4), (0, 3), (0, 2)}
    official = DecoderOptions(min_layer=0, descend_threshold=0.7)
    assert decoders["algorithm1_m0_descend"]() == links.spans(official)
