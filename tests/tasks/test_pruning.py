"""syntaxformer prune: pruning curves of attention heads (DESIGN.md §3.5).

The order functions on hand-made layouts (never a layer's last head; random reproducible per seed);
the curve on untrained tiny models saved as ``syntaxformer train`` leaves them: at fraction 0 the
project's perplexity of the unpruned model exactly, head_mask = physical pruning, the heads removed
are the lowest-scoring (once and recomputed); the command end to end, ``--save-at`` and bad input.
"""

from __future__ import annotations

import json

import pytest
import torch

from syntaxformer.analysis.heads import HeadLayout, head_importance, head_layout, normalise_by_layer
from syntaxformer.analysis.pruning import (
    HeadMasked,
    by_layer,
    curve_fractions,
    head_scores,
    heads_at,
    measure,
    pruned_copy,
    pruning_curve,
    random_order,
    rank_heads,
    reachable_fractions,
    removal_mask,
    select_heads,
)
from syntaxformer.data import load_gold_trees
from syntaxformer.data.embedded import ptb_sample_members
from syntaxformer.errors import InputError
from syntaxformer.evaluation.perplexity import masked_lm_perplexity

LAYOUT = HeadLayout(3, 4, ((0, 1, 2, 3), (0, 1, 2, 3), (0, 2)))  # layer 2 already lost heads 1 and 3


# --------------------------------------------------------------------------------------------------
# orders


def test_fractions_and_head_counts():
    assert curve_fractions(0.1) == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert curve_fractions(0.25) == [0.0, 0.25, 0.5, 0.75]
    assert curve_fractions(0.5) == [0.0, 0.5]
    assert [heads_at(f, 16) for f in curve_fractions(0.1)] == [0, 2, 3, 5, 6, 8, 10, 11, 13, 14]
    # 10 heads, 3 layers: at most 7 can go
    assert reachable_fractions(curve_fractions(0.25), LAYOUT) == ([0.0, 0.25, 0.5], [0.75])
    for bad in (0.0, 1.0, -0.1, 1.5, float("nan")):
        with pytest.raises(InputError, match="--step must be strictly between 0 and 1"):
            curve_fractions(bad)


def test_selection_never_removes_the_last_head_of_a_layer():
    # every head of layer 2 first, then layer 0's: layer 2's last head is skipped for the next candidate
    candidates = [(2, 0), (2, 2), (0, 3), (0, 2), (0, 1), (0, 0), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert select_heads(candidates, LAYOUT, [], 3) == [(2, 0), (0, 3), (0, 2)]
    chosen = select_heads(candidates, LAYOUT, [(2, 0)], 10)  # more than can go
    assert chosen == [(0, 3), (0, 2), (0, 1), (1, 0), (1, 1), (1, 2)]
    left = {layer: len(LAYOUT.present[layer]) for layer in range(3)}
    for layer, _ in chosen + [(2, 0)]:
        left[layer] -= 1
    assert left == {0: 1, 1: 1, 2: 1}
    assert by_layer([(1, 2), (0, 3), (1, 0)]) == {0: [3], 1: [0, 2]}


def test_rank_is_ascending_with_ties_in_flat_order():
    scores = torch.full((3, 4), float("nan"))
    for (layer, head), value in zip(
        [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 2)],
        [0.5, 0.1, 0.5, 0.9, 0.2, 0.5, 0.05, 0.3, 0.1, 0.7],
    ):
        scores[layer, head] = value
    assert rank_heads(scores, LAYOUT) == [
        (1, 2),
        (0, 1),
        (2, 0),
        (1, 0),
        (1, 3),
        (0, 0),
        (0, 2),
        (1, 1),
        (2, 2),
        (0, 3),
    ]
    assert rank_heads(scores, LAYOUT, exclude=[(1, 2), (0, 0)])[:2] == [(0, 1), (2, 0)]
    scores[2, 2] = float("nan")
    with pytest.raises(ValueError):
        rank_heads(scores, LAYOUT)


def test_random_order_is_reproducible_from_the_seed_and_differs_across_seeds():
    present = sorted((l, h) for l, heads in enumerate(LAYOUT.present) for h in heads)
    orders = [random_order(LAYOUT, seed) for seed in range(5)]
    assert random_order(LAYOUT, 3) == orders[3]
    assert all(sorted(o) == present for o in orders)  # a permutation of the heads present
    assert len({tuple(o) for o in orders}) == 5


# --------------------------------------------------------------------------------------------------
# the curve on tiny models


@pytest.fixture(scope="module")
def folders(tmp_path_factory, ptb_gold):
    """Untrained (seed 0) tiny models with 4 heads per layer, word tokenizer over ptb-sample's words:
    ``{"tree-transformer": Path, "plain": Path, "structformer": Path}``."""
    from syntaxformer.data.tokenization import build_word_tokenizer, save_tokenizer
    from syntaxformer.models import MODELS, make_config

    tokenizer = build_word_tokenizer([tree.leaves() for tree in ptb_gold])
    out = {}
    for key, name, overrides in [
        ("tree-transformer", "tree-transformer", {}),
        ("plain", "tree-transformer", {"prior": "none"}),
        ("structformer", "structformer", {}),
    ]:
        torch.manual_seed(0)
        model = MODELS[name](make_config(name, "tiny", len(tokenizer), num_attention_heads=4, **overrides))
        folder = tmp_path_factory.mktemp(key)
        model.save_pretrained(folder)
        save_tokenizer(tokenizer, folder)
        out[key] = folder
    return out


def _data(model, tokenizer, sentences=20, via="prune"):
    from syntaxformer.data.corpus import load_corpus
    from syntaxformer.parsing import DecoderOptions
    from syntaxformer.workflows.prune import prepare_data

    data, _ = prepare_data(
        model, tokenizer, {}, "ptb-sample:test", sentences, 0, DecoderOptions(), 8, 2048, via, treebank=None
    )
    assert data.sentences == [list(s) for s in load_corpus("ptb-sample:test")[:sentences]]
    return data


@pytest.mark.parametrize("key", ["tree-transformer", "plain", "structformer"])
def test_masking_equals_pruning_and_fraction_zero_is_the_unpruned_perplexity(key, folders):
    from syntaxformer.parsing import load_model

    model, tokenizer, _ = load_model(folders[key])
    data = _data(model, tokenizer)
    unpruned = masked_lm_perplexity(model, tokenizer, data.sentences, batch_tokens=2048, too_long="skip")
    points = pruning_curve(model, tokenizer, "random", [0.0, 0.25, 0.5], data, seed=4)
    assert points[0]["perplexity"] == unpruned["perplexity"] and points[0]["n_removed"] == 0
    assert [p["n_removed"] for p in points] == [
        0,
        heads_at(0.25, len(points[0]["removed_per_layer"]) * 4),
        heads_at(0.5, len(points[0]["removed_per_layer"]) * 4),
    ]
    removed = [(int(l), h) for l, hs in points[2]["removed"].items() for h in hs]
    masked = measure(model, tokenizer, removed, _data(model, tokenizer, via="mask"))["perplexity"]
    assert masked == pytest.approx(points[2]["perplexity"], rel=1e-5)
    assert abs(masked - unpruned["perplexity"]) > 1e-4 * unpruned["perplexity"]  # the heads mattered (untrained)
    assert head_layout(model).present == tuple(tuple(range(4)) for _ in head_layout(model).present)  # unchanged
    lm = HeadMasked(model, removal_mask(head_layout(model), removed))
    again = masked_lm_perplexity(lm, tokenizer, data.sentences, batch_tokens=2048)["perplexity"]
    assert again == pytest.approx(masked, rel=1e-12)


def test_importance_order_removes_the_least_important_heads_once_or_recomputed(folders):
    from syntaxformer.parsing import load_model

    model, tokenizer, _ = load_model(folders["tree-transformer"])
    data = _data(model, tokenizer, sentences=16)
    layout = head_layout(model)
    expected = normalise_by_layer(head_importance(model, data.batches, layout)[0])
    once = pruning_curve(model, tokenizer, "importance", [0.0, 0.25, 0.5], data)
    ranked = rank_heads(expected, layout)
    for point in once[1:]:
        want = select_heads(ranked, layout, [], point["n_removed"])
        assert point["removed"] == {str(k): v for k, v in by_layer(want).items()}
        assert point["scores"] == layout.grid(expected, 4)
    recomputed = pruning_curve(model, tokenizer, "importance", [0.0, 0.25, 0.5], data, recompute=True)
    assert recomputed[1]["removed"] == once[1]["removed"]  # the first step scores the unpruned model
    first = [(int(l), h) for l, hs in recomputed[1]["removed"].items() for h in hs]
    rescored = head_scores(pruned_copy(model, first), tokenizer, "importance", data)
    step = select_heads(rank_heads(rescored, layout, first), layout, first, recomputed[2]["n_removed"] - len(first))
    assert recomputed[2]["removed"] == {str(k): v for k, v in by_layer(first + step).items()}
    assert recomputed[2]["scores"] == layout.grid(rescored, 4)
    assert all(recomputed[2]["scores"][l][h] is None for l, h in first)
    assert all(min(p["heads_left_per_layer"]) >= 1 for p in once + recomputed)


# --------------------------------------------------------------------------------------------------
# the command


def _run(argv):
    from syntaxformer.cli import main

    return main(argv)


def test_command_end_to_end_with_save_at(folders, tmp_path, capsys):
    from syntaxformer.analysis.heads import choose_text
    from syntaxformer.parsing import load_model

    model = folders["tree-transformer"]
    record = {
        "arguments": {
            "corpus": "ptb-sample:dev",
            "valid": None,
            "valid_fraction": 0.01,
            "mask_rate": 0.15,
            "mask_replace": "bert",
        },
        "preset": "tiny",
        "seed": 0,
    }
    (model / "training.json").write_text(json.dumps(record))
    out = tmp_path / "out"
    assert (
        _run(
            [
                "prune",
                "--model",
                str(model),
                "--out",
                str(out),
                "--order",
                "confidence",
                "--step",
                "0.5",
                "--seeds",
                "1",
                "--seed",
                "3",
                "--save-at",
                "0.5",
                "--max-sentences",
                "12",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "confidence ppl" in printed and "random ppl" in printed and "held-out 0.01 of ptb-sample:dev" in printed
    report = json.loads((out / "prune.json").read_text())
    assert (out / "prune.png").stat().st_size > 0 and (out / "prune.svg").is_file()
    assert report["fractions"] == [0.0, 0.5] and report["random_seeds"] == [3] and report["seed"] == 3
    assert list(report["orders"]) == ["confidence", "random"] and report["n_heads"] == 12
    assert report["protocol"]["perplexity"].startswith("one-mask-per-input")
    assert report["data"]["treebank"] == "ptb-sample:dev" and report["data"]["text"]["n_sentences"] == 12
    point = report["orders"]["confidence"]["points"][1]
    assert 0 <= point["sentence_f1"] <= 100 and point["n_removed"] == 6
    assert report["orders"]["random"]["points"][1]["perplexity_sd"] == 0.0
    saved = report["saved"]
    assert (saved["order"], saved["fraction"], saved["removed"]) == ("confidence", 0.5, point["removed"])
    pruned, tokenizer, info = load_model(out / "pruned-0.5")
    assert info["preset"] == "tiny"
    assert [a.num_heads for a in pruned.attention_modules()] == [4 - n for n in point["removed_per_layer"]]
    assert {str(k): v for k, v in pruned.config.pruned_heads.items()} == point["removed"]
    sentences = choose_text(record, None, 12).sentences
    assert report["data"]["text"]["n_words"] == sum(map(len, sentences))
    ppl = masked_lm_perplexity(pruned, tokenizer, sentences, batch_tokens=4096)["perplexity"]
    assert ppl == pytest.approx(point["perplexity"], rel=1e-5)


def test_random_control_mean_and_sample_sd():
    runs = [
        [
            dict(
                fraction=0.0,
                n_removed=0,
                fraction_removed=0.0,
                perplexity=10.0,
                sentence_f1=40.0,
                removed_per_layer=[0, 0],
            ),
            dict(fraction=0.5, n_removed=2, fraction_removed=0.5, perplexity=p, sentence_f1=f, removed_per_layer=r),
        ]
        for p, f, r in [(20.0, 30.0, [1, 1]), (30.0, 36.0, [2, 0]), (40.0, 33.0, [1, 1])]
    ]
    from syntaxformer.analysis.pruning import average_runs

    first, second = average_runs(runs)
    assert (first["perplexity"], first["perplexity_sd"], first["sentence_f1_sd"]) == (10.0, 0.0, 0.0)
    assert second["perplexity"] == 30.0 and second["perplexity_sd"] == pytest.approx(10.0)  # n - 1
    assert second["sentence_f1"] == 33.0 and second["sentence_f1_sd"] == pytest.approx(3.0)
    assert second["removed_per_layer_mean"] == pytest.approx([4 / 3, 2 / 3])


def test_command_json_for_a_model_without_structure(folders, tmp_path, capsys):
    assert (
        _run(
            [
                "prune",
                "--model",
                str(folders["plain"]),
                "--out",
                str(tmp_path),
                "--step",
                "0.5",
                "--seeds",
                "1",
                "--corpus",
                "ptb-sample:test",
                "--max-sentences",
                "6",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["data"]["treebank"] is None and summary["fractions"] == [0.0, 0.5]
    assert list(summary["orders"]) == ["importance", "random"]
    assert all("sentence_f1" not in p for p in summary["orders"]["importance"])
    assert (tmp_path / "prune.png").is_file()


def test_command_f1_on_another_treebank_or_none(folders, tmp_path, capsys):
    # --treebank: the sentence F1 against the trees given (here ptb-sample's first file), or none at all
    (tmp_path / "one.mrg").write_text(ptb_sample_members("combined")[0][1], encoding="utf-8")
    base = ["prune", "--model", str(folders["tree-transformer"]), "--step", "0.5", "--seeds", "0"]
    base += ["--max-sentences", "4", "--json"]
    assert _run([*base, "--out", str(tmp_path / "file"), "--treebank", str(tmp_path / "one.mrg")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["data"]["treebank"] == str(tmp_path / "one.mrg")
    assert summary["data"]["n_treebank_sentences"] == len(load_gold_trees(tmp_path / "one.mrg"))
    assert all(0 <= p["sentence_f1"] <= 100 for p in summary["orders"]["importance"])
    assert _run([*base, "--out", str(tmp_path / "none"), "--treebank", "none"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["data"]["treebank"] is None
    assert all("sentence_f1" not in p for p in summary["orders"]["importance"])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--order", "loudest"], "unknown pruning order 'loudest'"),
        (["--step", "0"], "--step must be strictly between 0 and 1"),
        (["--step", "1.2"], "--step must be strictly between 0 and 1"),
        (["--save-at", "0.3", "--step", "0.25"], "--save-at 0.3 is not a fraction of the curve"),
        (["--order", "random", "--seeds", "0"], "--seeds must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(argv, message, folders, tmp_path, capsys):
    assert _run(["prune", "--model", str(folders["plain"]), "--out", str(tmp_path), *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("syntaxformer prune: error:") and message in err
