"""``syntaxformer induce`` end to end, in process: tiny runs (3 training steps of the ``tiny`` preset)
that write the model, the trees and report.json, scored against the gold and the baselines."""

from __future__ import annotations

import json

import conllu
import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.data.dependency import read_conllu
from syntaxformer.data.embedded import ptb_sample_members
from syntaxformer.data.preprocess import load_gold_trees
from syntaxformer.data.treebank import read_treebank
from syntaxformer.decoding.dependency import is_tree
from syntaxformer.decoding.spans import spans_to_tree
from syntaxformer.evaluation.constituency import evaluate_constituency
from syntaxformer.evaluation.protocols import PROTOCOLS
from syntaxformer.models import MODELS
from syntaxformer.parsing import load_model
from syntaxformer.runtime import code_version
from syntaxformer.workflows.induce import RECIPES, resolve_recipe

torch.set_num_threads(1)

#: The keys of ``syntaxformer evaluate`` that report.json gives for the model and every baseline.
EVALUATE_KEYS = {"sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1", "n_sentences", "label_recall"}
BASELINES = ("left_branching", "right_branching", "random", "balanced")
TINY = ["--preset", "tiny", "--max-steps", "3", "--threads", "1", "--quiet"]
#: the Tree Transformer, named (the main job's architecture)
TT = ["--architecture", "tree-transformer"]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def small_treebank(tmp_path_factory):
    """The first 6 files of ptb-sample (raw .mrg trees, punctuation and all) as one .mrg file, and
    their words as a raw-text training corpus."""
    folder = tmp_path_factory.mktemp("small")
    mrg = folder / "small.mrg"
    mrg.write_text("\n".join(text for _, text in ptb_sample_members("combined")[:6]), encoding="utf-8")
    text = folder / "small.txt"
    text.write_text("".join(" ".join(t.leaves()) + "\n" for t in load_gold_trees(mrg)), encoding="utf-8")
    return mrg, text


def _check_report(report: dict, name: str, n_sentences: int) -> None:
    for key in (name,) + BASELINES:
        assert EVALUATE_KEYS <= set(report[key]), key
        assert report[key]["n_sentences"] == n_sentences
    assert report["preset"] == "tiny" and report["seed"] == 0
    assert set(report["data"]) >= {"train", "treebank", "n_sentences", "setting"}
    assert report["minutes"]["total"] >= report["minutes"]["train"] >= 0
    assert report["training"]["steps"] == 3
    # the untrained model (step 0, same seed) is scored beside the trained one in every part
    for part in report["parts"].values():
        assert EVALUATE_KEYS <= set(part["untrained"]) and EVALUATE_KEYS <= set(part[name])
    # the learning curve starts at step 0 and ends at the last step
    steps = [p["step"] for p in report["curve"]["points"]]
    assert steps[0] == 0 and steps[-1] == 3
    assert report["recipe"] == "default" and "dev" in report["selection"]


def test_induce_tree_transformer_on_a_small_treebank(capsys, small_treebank, tmp_path):
    mrg, text = small_treebank
    gold = load_gold_trees(mrg)
    code, out, err = _run(
        capsys,
        "induce",
        "--treebank",
        mrg,
        "--corpus",
        text,
        "--out",
        tmp_path,
        *TT,
        *TINY,
        "--set",
        'constituent_diagonal="one"',
        "--set",
        "constituent_scale=8",
    )
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    _check_report(report, "tree_transformer", len(gold))
    # --set: config fields after the recipe's (its official variant kept), in the trained model
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert (config["constituent_variant"], config["constituent_diagonal"], config["constituent_scale"]) == (
        "official",
        "one",
        8,
    )
    assert report["model"] == "tree-transformer" and "dependency" not in report
    # the code that scored (and trained) is named
    assert report["code"] == code_version() == report["training"]["code"]
    assert report["data"]["treebank"] == str(mrg) and report["data"]["train"] == str(text)
    assert list(report["parts"]) == ["all"] and report["primary"] == "all"
    assert report["curve"]["treebank"] == str(mrg)
    # the default protocol (prpn): the report as before --protocol existed (no name, no curve protocol)
    assert "protocol_name" not in report and set(report["curve"]) == {"treebank", "points"}
    assert (tmp_path / "curve.png").is_file() and (tmp_path / "curve.svg").is_file()
    # the model folder is a loadable model trained for 3 steps
    model, _, info = load_model(tmp_path / "model")
    assert type(model).__name__ == "TreeTransformerForMaskedLM" and info["steps"] == 3
    # trees.txt: one tree per gold sentence over its words; the report scores exactly those trees
    trees = read_treebank(tmp_path / "trees.txt")
    assert [t.leaves() for t in trees] == [g.leaves() for g in gold]
    assert not (tmp_path / "dependencies.conllu").exists()
    rescored = evaluate_constituency(trees, gold)
    for key in EVALUATE_KEYS:
        assert report["tree_transformer"][key] == pytest.approx(rescored[key]), key
    # the right-branching row is the score of right-branching trees built here
    right = [spans_to_tree(g.leaves(), {(i, len(g.leaves())) for i in range(len(g.leaves()) - 1)}) for g in gold]
    assert report["right_branching"]["sentence_f1"] == pytest.approx(evaluate_constituency(right, gold)["sentence_f1"])
    # the printed table names the model and every baseline
    for row in ("tree-transformer", "left-branching", "right-branching", "random", "balanced"):
        assert row in out
    # export_pretrained writes a float16 folder that loads and induces the same links (to fp16)
    from safetensors import safe_open

    from syntaxformer.parsing import model_structures
    from syntaxformer.pretrained import export_pretrained

    exported = export_pretrained(tmp_path, tmp_path / "exported")
    with safe_open(str(exported / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    assert json.loads((exported / "report.json").read_text()) == report
    half, tokenizer, info = load_model(exported)
    full, _, _ = load_model(tmp_path / "model")
    words = [g.leaves() for g in gold[:20]]
    for a, b in zip(model_structures(half, tokenizer, words), model_structures(full, tokenizer, words)):
        assert abs(a.link_probs - b.link_probs).max() < 2e-2
    assert info["steps"] == 3


def test_induce_bf16_trains_under_autocast_and_the_report_says_so(capsys, small_treebank, tmp_path):
    mrg, text = small_treebank
    args = ["induce", "--treebank", mrg, "--corpus", text, "--curve-treebank", "none", *TINY]
    code, _, err = _run(capsys, *args, "--out", tmp_path / "bf16", "--bf16")
    assert code == 0, err
    report = json.loads((tmp_path / "bf16" / "report.json").read_text())
    assert report["training"]["recipe"]["bf16"] is True
    assert json.loads((tmp_path / "bf16" / "model" / "training.json").read_text())["bf16"] is True
    code, _, err = _run(capsys, *args, "--out", tmp_path / "fp32")
    assert code == 0, err
    fp32 = json.loads((tmp_path / "fp32" / "report.json").read_text())
    assert "bf16" not in fp32["training"]["recipe"]
    # the same seed and batches: the losses differ by bfloat16's rounding only
    losses = [r["training"]["final_train_loss"] for r in (report, fp32)]
    assert losses[0] != losses[1] and losses[0] == pytest.approx(losses[1], rel=2e-2)


def test_induce_bad_treebank_fails_before_training(capsys, tmp_path):
    missing = tmp_path / "absent.mrg"
    code, _, err = _run(capsys, "induce", "--treebank", missing, "--out", tmp_path / "o", *TINY)
    assert code == 1 and str(missing) in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_induce_long_recipe_needs_its_text(capsys, tmp_path):
    """The Tree Transformer's long recipe trains on the ptb-lm text, which is not shipped: without
    --corpus it is a one-line error before any work, naming the text."""
    code, _, err = _run(capsys, "induce", "--recipe", "long", "--out", tmp_path / "o", "--quiet")
    assert code == 1 and "ptb-lm" in err and "--corpus" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
    fields, overrides, min_layer = resolve_recipe("tree-transformer", "long")
    assert (fields["preset"], fields["corpus"], fields["max_steps"], min_layer) == ("small", "ptb-lm", 6000, 0)
    assert overrides == {"constituent_variant": "official"}
    _, overrides, _ = resolve_recipe(
        "tree-transformer",
        "default",
        variant="paper",
        config=dict(constituent_variant="official", constituent_scale=64.0),
    )
    assert overrides == {"constituent_variant": "official", "constituent_scale": 64.0}  # --set comes last


@pytest.mark.skipif("structformer" not in MODELS, reason="StructFormer is not registered in MODELS")
def test_induce_structformer_long_recipe_needs_its_text(capsys, tmp_path):
    """StructFormer's long recipe is its default setting on the ptb-lm text (docs/results/induce/recipes.md): without
    --corpus a one-line error before any work; with it, the default's fields but the text."""
    code, _, err = _run(
        capsys, "induce", "--architecture", "structformer", "--recipe", "long", "--out", tmp_path / "o", "--quiet"
    )
    assert code == 1 and "ptb-lm" in err and "--corpus" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
    long, _, _ = resolve_recipe("structformer", "long")
    default, _, _ = resolve_recipe("structformer", "default")
    assert long.pop("corpus") == "ptb-lm" and "corpus" not in default
    assert {k: v for k, v in long.items() if k != "max_minutes"} == {
        k: v for k, v in default.items() if k != "max_minutes"
    }


@pytest.mark.skipif("structformer" not in MODELS, reason="StructFormer is not registered in MODELS")
def test_induce_structformer_on_ptb_sample(capsys, tmp_path):
    code, out, err = _run(capsys, "induce", "--architecture", "structformer", "--out", tmp_path, "--json", *TINY)
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert json.loads(out) == report  # --json prints report.json
    _check_report(report, "structformer", 1993)  # the headline part is the test half
    assert report["model"] == "structformer" and report["primary"] == "test"
    assert report["data"]["train"] == report["data"]["treebank"] == "ptb-sample"
    assert report["data"]["setting"].startswith("transductive")
    assert report["curve"]["treebank"] == "ptb-sample:dev"
    # DESIGN.md §7 reference numbers: right-branching on test, dev and all of ptb-sample
    parts = report["parts"]
    assert [round(parts[p]["right_branching"]["sentence_f1"], 2) for p in ("test", "dev", "all")] == [
        39.88,
        39.94,
        39.91,
    ]
    assert [
        parts[p][name]["n_sentences"]
        for p, name in (("test", "structformer"), ("dev", "structformer"), ("all", "structformer"))
    ] == [1993, 1921, 3914]
    for part, n in (("test", 1993), ("dev", 1921), ("all", 3914)):
        dependency = parts[part]["dependency"]
        assert set(dependency) == {"structformer", "left_chain", "right_chain"}
        for row in dependency.values():
            assert 0 <= row["uas"] <= row["uuas"] <= 100 and row["n_sentences"] == n
    assert dependency["left_chain"]["uas"] != dependency["right_chain"]["uas"]
    # the dependencies behind the row: one well-formed tree per ptb-sample sentence
    sentences = read_conllu(tmp_path / "dependencies.conllu")
    assert len(sentences) == 3914
    assert all(is_tree(list(s.heads), single_root=True) for s in sentences)
    assert len(conllu.parse((tmp_path / "dependencies.conllu").read_text(encoding="utf-8"))) == 3914
    assert len((tmp_path / "trees.txt").read_text().splitlines()) == 3914


def _induce_small(capsys, small_treebank, out, *extra) -> tuple[dict, str]:
    """``induce`` of the tiny preset for 3 steps on the small treebank: (report.json, printed text)."""
    mrg, text = small_treebank
    argv = ["induce", "--treebank", mrg, "--corpus", text, "--out", out, *TT, *TINY, *extra]
    code, printed, err = _run(capsys, *argv)
    assert code == 0, err
    return json.loads((out / "report.json").read_text()), printed


def _evaluate_json(capsys, protocol: str, pred, gold) -> dict:
    code, printed, err = _run(capsys, "evaluate", "--protocol", protocol, "--pred", pred, "--gold", gold, "--json")
    assert code == 0, err
    return json.loads(printed)


def test_induce_protocol_evalb_scores_every_part_with_evalb(capsys, small_treebank, tmp_path):
    """--protocol evalb: the model's corpus F1 is evaluate --protocol evalb's on trees.txt; every row is
    EVALB's (no sentence F1, WSJ-10 or label recall); the report names the protocol; the curve stays PRPN."""
    mrg, _ = small_treebank
    gold = load_gold_trees(mrg)
    report, printed = _induce_small(capsys, small_treebank, tmp_path, "--protocol", "evalb")
    evaluated = _evaluate_json(capsys, "evalb", tmp_path / "trees.txt", mrg)
    assert report["tree_transformer"]["corpus_f1"] == pytest.approx(evaluated["corpus_f1"])
    assert report["tree_transformer"]["matched"] == evaluated["matched"]
    assert report["protocol_name"] == "evalb" and report["protocol_source"] == PROTOCOLS["evalb"].source
    assert report["protocol"] == PROTOCOLS["evalb"].rules
    # a binary tree over n words has n - 1 internal nodes, each one EVALB bracket (whole sentence
    # included; the gold has no punctuation left to delete), for every row
    binary_brackets = sum(len(g.leaves()) - 1 for g in gold)
    for row in ("tree_transformer", "untrained") + BASELINES:
        scores = report[row]
        assert scores["pred_brackets"] == binary_brackets, row
        assert scores["matched"] >= len(gold)  # the whole-sentence bracket always matches
        assert not {"sentence_f1", "wsj10_sentence_f1", "label_recall"} & set(scores), row
    right = [spans_to_tree(g.leaves(), {(i, len(g.leaves())) for i in range(len(g.leaves()) - 1)}) for g in gold]
    assert report["right_branching"]["corpus_f1"] == pytest.approx(PROTOCOLS["evalb"].score(right, gold)["corpus_f1"])
    assert report["random"]["std"]["corpus_f1"] > 0
    layers = report["parts"]["all"]["single_layer"]
    assert layers and all(set(r) == {"corpus_f1"} for r in layers.values())
    assert report["curve"]["protocol"] == "prpn" and [p["step"] for p in report["curve"]["points"]][-1] == 3
    # the table: EVALB's columns, no sentence F1; the header names the protocol and its source
    assert "protocol: evalb: " in printed and f"source:   {PROTOCOLS['evalb'].source}" in printed
    assert "corpus F1" in printed and "complete match" in printed and "sentence F1" not in printed
    assert "label recall: not given by protocol evalb" in printed and "corpus F1 by layer" in printed


def test_induce_protocol_cpcfg_sentence_f1_is_evaluates(capsys, small_treebank, tmp_path):
    mrg, _ = small_treebank
    gold = load_gold_trees(mrg)
    report, printed = _induce_small(capsys, small_treebank, tmp_path, "--protocol", "cpcfg", "--curve-treebank", "none")
    evaluated = _evaluate_json(capsys, "cpcfg", tmp_path / "trees.txt", mrg)
    for key in ("sentence_f1", "corpus_f1", "n_sentence_f1"):
        assert report["tree_transformer"][key] == pytest.approx(evaluated[key]), key
    assert report["protocol_name"] == "cpcfg" and report["curve"] is None
    # compound-pcfg's span set of a binary tree: its n - 1 internal nodes but the whole sentence
    assert report["untrained"]["pred_brackets"] == sum(len(g.leaves()) - 2 for g in gold)
    assert "wsj10_sentence_f1" not in report["balanced"] and "label_recall" not in report["left_branching"]
    assert "sentence F1 by layer" in printed and "corpus R" in printed and "WSJ-10" not in printed


def test_induce_unknown_protocol_fails_before_training(capsys, small_treebank, tmp_path):
    mrg, text = small_treebank
    argv = ["induce", "--protocol", "nope", "--treebank", mrg, "--corpus", text, "--out", tmp_path / "o", *TINY]
    code, _, err = _run(capsys, *argv)
    assert code == 1 and "'nope'" in err and "evalb" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_induce_cut_by_max_minutes_says_so_and_resume_finishes_it(capsys, small_treebank, tmp_path):
    """The recipe is defined by steps: a run cut by --max-minutes reports the steps done of the steps
    planned (report and printed header); --resume with the same command finishes the planned steps."""
    mrg, text = small_treebank
    common = [
        "induce",
        "--treebank",
        mrg,
        "--corpus",
        text,
        "--out",
        tmp_path,
        "--preset",
        "tiny",
        "--max-steps",
        "40",
        "--threads",
        "1",
        "--quiet",
        "--curve-treebank",
        "none",
    ]
    code, out, err = _run(capsys, *common, "--max-minutes", "0.000001")
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    training = report["training"]
    assert training["stopped"] == "max_minutes" and training["complete"] is False
    assert training["planned_steps"] == 40 and 0 <= training["steps"] < 40
    assert f"STOPPED EARLY: {training['steps']:,} of 40 planned steps (max_minutes)" in out
    code, out, err = _run(capsys, *common, "--resume")
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["training"]["steps"] == 40 and report["training"]["complete"] is True
    assert "STOPPED EARLY" not in out and "40 steps" in out
    # the report names the resume and the steps' minutes of both processes, not only this one's
    assert report["training"]["resumed_from_steps"] == [training["steps"]]
    saved = json.loads((tmp_path / "model" / "training.json").read_text())
    assert report["training"]["train_minutes_total"] == saved["train_minutes_total"] > 0


def test_recipes_have_no_wall_clock_cap():
    for model in RECIPES:
        for recipe in RECIPES[model]:
            fields, _, _ = resolve_recipe(model, recipe)
            length = fields.get("max_steps") or fields.get("epochs")  # a fixed number of steps or epochs
            assert fields.get("max_minutes") is None and length > 0, (model, recipe)


def test_a_short_run_records_at_most_curve_points_points(capsys, small_treebank, tmp_path):
    """20 steps: the learning curve parses every 2 steps (11 points, step 0 and the end included), not
    at every step; the period is ceil(steps / 11) (the default recipe's 7,000 steps: every 637)."""
    from syntaxformer.workflows.induce import CURVE_POINTS, curve_period

    assert CURVE_POINTS == 12
    assert [curve_period(n) for n in (1, 5, 11, 12, 20, 22, 23, 7000)] == [1, 1, 1, 2, 2, 2, 3, 637]
    mrg, text = small_treebank
    argv = ["induce", "--treebank", mrg, "--corpus", text, "--out", tmp_path, *TINY[:2], "--max-steps", 20]
    code, _, _ = _run(capsys, *argv, "--threads", 1, "--quiet")
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert [point["step"] for point in report["curve"]["points"]] == list(range(0, 21, 2))


def test_a_recipes_note_is_printed_in_the_header():
    from pathlib import Path

    from syntaxformer.cli.induce import format_induce_report
    from syntaxformer.workflows.induce import recipe_note

    path = Path(__file__).resolve().parents[2] / "records" / "induce" / "tree-transformer-wikitext-cpu-seed0.json"
    report = json.loads(path.read_text())
    assert "note" not in report and not any(
        line.startswith("note:") for line in format_induce_report(report).splitlines()
    )
    note = recipe_note("tree-transformer", "default")
    report["note"] = note
    lines = format_induce_report(report).splitlines()
    assert [line.split(":", 1)[1].strip() for line in lines if line.startswith("note:")] == [note]


def test_induce_takes_the_accelerator_step_options_and_records_them(capsys, small_treebank, tmp_path):
    """``--fixed-shapes --pad-to-multiple 8 --prefetch --tf32 --step-graph cuda-graph`` reach the
    training (its training.json) and the report's recipe record; on the CPU the graph falls back to the
    eager step; --rescore refuses them (it trains nothing)."""
    fast = ["--fixed-shapes", "--pad-to-multiple", "8", "--prefetch", "--tf32", "--step-graph", "cuda-graph"]
    report, _ = _induce_small(capsys, small_treebank, tmp_path / "fast", "--curve-treebank", "none", *fast)
    expected = dict(fixed_shapes=True, pad_to_multiple=8, prefetch=True, tf32=True, step_graph="cuda-graph")
    assert {k: report["training"]["recipe"][k] for k in expected} == expected
    arguments = json.loads((tmp_path / "fast" / "model" / "training.json").read_text())["arguments"]
    assert {k: arguments[k] for k in expected} == expected
    plain, _ = _induce_small(capsys, small_treebank, tmp_path / "plain", "--curve-treebank", "none")
    assert not set(expected) & set(plain["training"]["recipe"])
    code, _, err = _run(capsys, "induce", "--rescore", "--out", tmp_path / "fast", "--prefetch")
    assert code == 1 and "--rescore trains nothing: drop --prefetch" in err
