"""syntaxformer heads: head importance (Michel et al. 2019) and roles (Voita et al. 2019), DESIGN.md §3.5.

Exact values where the definitions give them: importance against central finite differences of the
masked-LM loss in float64, confidence / positional / rare-word shares and syntactic accuracies on
hand-made attention, baselines on a hand-made treebank; then the command end to end.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.nn.functional as F

from syntaxformer.analysis.heads import (
    ANY,
    DIRECTIONS,
    DependencyCounts,
    RoleCounts,
    analyse_model,
    attention_weights,
    head_importance,
    head_layout,
    load_dependency_data,
    max_attention,
    normalise_by_layer,
    relation_baselines,
    word_attention,
)
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, make_config
from syntaxformer.training.mlm import mask_tokens

D2H, H2D = DIRECTIONS

# --------------------------------------------------------------------------------------------------
# importance


def _tiny(name: str, vocab: int = 30, prune=None, **overrides):
    torch.manual_seed(0)
    model = MODELS[name](make_config(name, "tiny", vocab, **overrides))
    if prune:
        model.prune_heads(prune)
    return model.double().eval()


def _masked_batch(seed: int, batch: int = 3, length: int = 7, vocab: int = 30):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (batch, length), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids[1, 5:] = 0
    inputs, labels = mask_tokens(ids, mask, 2, vocab, rate=0.3, generator=g, special_ids=(0, 2, 3))
    return inputs, mask, labels


def _loss(model, batch, xi):
    inputs, mask, labels = batch
    selected = labels != -100
    logits = model(input_ids=inputs, attention_mask=mask, head_mask=xi).logits
    return F.cross_entropy(logits[selected], labels[selected])


def _finite_difference(model, batch, layers, heads, eps=1e-6):
    grad = torch.zeros(layers, heads, dtype=torch.float64)
    with torch.no_grad():
        for layer in range(layers):
            for head in range(heads):
                step = torch.zeros(layers, heads, dtype=torch.float64)
                step[layer, head] = eps
                ones = torch.ones(layers, heads, dtype=torch.float64)
                grad[layer, head] = (_loss(model, batch, ones + step) - _loss(model, batch, ones - step)) / (2 * eps)
    return grad


@pytest.mark.parametrize(
    "name,overrides", [("tree-transformer", {}), ("tree-transformer", {"prior": "none"}), ("structformer", {})]
)
def test_importance_is_the_token_weighted_mean_of_absolute_gradients(name, overrides):
    """One batch: I = |dL/dxi| (central differences, float64); two batches: sum_b T_b |g_b| / sum_b T_b."""
    model = _tiny(name, **overrides)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    batches = [_masked_batch(1), _masked_batch(2, batch=2, length=5)]
    grads = [_finite_difference(model, b, layers, heads) for b in batches]
    tokens = [int((b[2] != -100).sum()) for b in batches]

    one, n_one, loss = head_importance(model, batches[:1])
    assert n_one == tokens[0]
    with torch.no_grad():
        assert loss == pytest.approx(float(_loss(model, batches[0], None)), rel=1e-12)
    torch.testing.assert_close(one, grads[0].abs(), rtol=1e-6, atol=1e-12)
    assert (one > 0).all()

    both, n_both, _ = head_importance(model, batches)
    expected = (tokens[0] * grads[0].abs() + tokens[1] * grads[1].abs()) / sum(tokens)
    assert n_both == sum(tokens)
    torch.testing.assert_close(both, expected, rtol=1e-6, atol=1e-12)


def test_importance_of_a_pruned_head_is_nan_and_normalisation_is_per_layer():
    model = _tiny("tree-transformer", prune={0: [1]})
    importance, _, _ = head_importance(model, [_masked_batch(3)])
    assert torch.isnan(importance[0, 1]) and not torch.isnan(importance[0, 0]) and not torch.isnan(importance[1:]).any()
    normalised = normalise_by_layer(torch.tensor([[3.0, 4.0], [float("nan"), 2.0], [0.0, 0.0]]))
    torch.testing.assert_close(
        normalised, torch.tensor([[0.6, 0.8], [float("nan"), 1.0], [0.0, 0.0]], dtype=torch.float64), equal_nan=True
    )
    layout = head_layout(model)
    assert layout.present == ((0,), (0, 1), (0, 1))
    assert layout.grid(normalise_by_layer(importance))[0][1] is None


# --------------------------------------------------------------------------------------------------
# roles on hand-made attention


def _one_hot_rows(targets: list[int], n: int) -> torch.Tensor:
    rows = torch.zeros(n, n)
    rows[torch.arange(n), torch.tensor(targets)] = 1.0
    return rows


def _hand_made():
    """Two sentences (5 words; 3 words + 2 padding), 5 heads, one token per word, no [CLS].

    head 0: the previous word (word 0: itself); head 1: the next word (last word: itself);
    head 2: uniform rows (ties -> the first word); head 3: always word 2 (sentence 1's rarest);
    head 4: rows scaled by 0.5 (a C ⊙ softmax-like row): previous word 0.3, itself 0.2.
    """
    n, heads = 5, 5
    att = torch.zeros(2, heads, n, n)
    for b, length in enumerate((5, 3)):
        m = length
        att[b, 0, :m, :m] = _one_hot_rows([0] + list(range(m - 1)), m)
        att[b, 1, :m, :m] = _one_hot_rows(list(range(1, m)) + [m - 1], m)
        att[b, 2, :m, :m] = 1.0 / m
        att[b, 3, :m, :m] = _one_hot_rows([2] * m, m)
        att[b, 4, :m, :m] = 0.2 * torch.eye(m) + 0.3 * torch.cat([torch.eye(m)[:1], torch.eye(m)[:-1]])
    word_ids = [[0, 1, 2, 3, 4], [0, 1, 2]]
    return att, word_ids


def test_confidence_positional_and_rare_word_shares_on_hand_made_attention():
    att, word_ids = _hand_made()
    weights, mask = word_attention(att, word_ids)
    assert weights.shape == (2, 5, 5, 6) and mask.tolist() == [[True] * 5, [True] * 3 + [False] * 2]
    torch.testing.assert_close(weights[0, ..., :5], att[0])  # one token per word: the identity
    torch.testing.assert_close(weights[1, :, :3, :3], att[1, :, :3, :3])
    assert (weights[..., 5] == 0).all()  # no special token
    counts = RoleCounts(5)
    counts.add(weights, mask, rarest=torch.tensor([2, 0]))
    r = counts.result()
    # 8 words; 6 have a previous word, 6 a next word; rare: 4 + 2 words other than the rarest
    assert (r["n_words"], r["n_previous"], r["n_next"], r["n_rare"]) == (8, 6, 6, 6)
    torch.testing.assert_close(r["previous"], torch.tensor([100.0, 0, 200 / 6, 100 / 6, 100.0], dtype=torch.float64))
    torch.testing.assert_close(r["next"], torch.tensor([0.0, 100, 0, 200 / 6, 0], dtype=torch.float64))
    # confidence: one-hot rows 1; uniform rows 1/5 (5 words) and 1/3 (3 words); head 4: 0.3/0.5 after
    # normalising the row (0.6), word 0's row 0.5/0.5 = 1; raw maxima 0.3 and 0.5
    torch.testing.assert_close(
        r["confidence"],
        torch.tensor([1.0, 1.0, (5 * 0.2 + 3 / 3) / 8, 1.0, (2 * 1.0 + 6 * 0.6) / 8], dtype=torch.float64),
    )
    torch.testing.assert_close(r["confidence_raw"][4], torch.tensor((2 * 0.5 + 6 * 0.3) / 8, dtype=torch.float64))
    # rare: sentence 1's rarest is word 2 (4 other words), sentence 2's is word 0 (2 others); hits:
    # head 0: word 3 of s1, word 1 of s2; head 1: word 1 of s1; head 2 (word 0): words 1, 2 of s2;
    # head 3 (word 2): the 4 words of s1; head 4 (as head 0): 2
    torch.testing.assert_close(
        r["rare_word"], torch.tensor([200 / 6, 100 / 6, 200 / 6, 400 / 6, 200 / 6], dtype=torch.float64)
    )


def test_word_attention_takes_first_pieces_sums_pieces_and_keeps_special_tokens_apart():
    # tokens: [CLS] the cat ##s sat -> words the(0) cats(1) sat(2)
    word_ids = [[None, 0, 1, 1, 2]]
    att = torch.tensor(
        [
            [0.2, 0.2, 0.2, 0.2, 0.2],
            [0.5, 0.1, 0.1, 0.1, 0.2],  # the: most on [CLS]
            [0.0, 0.3, 0.1, 0.2, 0.4],  # cat: first piece of "cats"
            [0.9, 0.0, 0.0, 0.0, 0.1],  # ##s: not a word's row
            [0.0, 0.1, 0.3, 0.3, 0.3],
        ]
    )[None, None]  # sat: "cats" = 0.6
    weights, mask = word_attention(att, word_ids)
    expected = torch.tensor([[0.1, 0.2, 0.2, 0.5], [0.3, 0.3, 0.4, 0.0], [0.1, 0.6, 0.3, 0.0]])
    torch.testing.assert_close(weights[0, 0], expected)
    confidence, _, target = max_attention(weights, mask)
    assert target[0, 0].tolist() == [3, 2, 1]  # [CLS] (the special column), sat, cats
    torch.testing.assert_close(confidence[0, 0], torch.tensor([0.5, 0.4, 0.6]))


# --------------------------------------------------------------------------------------------------
# syntactic role

#: the dog barks loudly / a big cat sleeps / dogs bark
HEADS = [[2, 3, 0, 3], [3, 3, 4, 0], [2, 0]]
RELS = [["det", "nsubj", "root", "advmod"], ["det", "amod", "nsubj", "root"], ["nsubj", "root"]]


def test_relation_baselines_on_a_hand_made_treebank():
    b = relation_baselines(HEADS, RELS)
    assert b["det", D2H] == dict(n=2, offset=1, baseline=50.0)  # offsets +1, +2: tie -> nearer
    assert b["det", H2D] == dict(n=2, offset=-1, baseline=50.0)
    assert b["nsubj", D2H] == dict(n=3, offset=1, baseline=100.0)
    assert b["advmod", D2H] == dict(n=1, offset=-1, baseline=100.0)
    assert b["amod", H2D] == dict(n=1, offset=-1, baseline=100.0)
    assert b[ANY, D2H] == dict(n=7, offset=1, baseline=pytest.approx(500 / 7))
    assert ("root", D2H) not in b
    assert set(relation_baselines(HEADS)) == {(ANY, D2H), (ANY, H2D)}


def test_attention_on_the_gold_head_is_100_percent_syntactic():
    """Head 0 points every word at its gold head (root: itself); head 1 points every word at
    word 0, so head->dependent is right exactly where a head's dependent is word 0."""
    n = 4
    target = torch.zeros(3, 2, n, dtype=torch.long)
    for s, heads in enumerate(HEADS):
        target[s, 0, : len(heads)] = torch.tensor([h - 1 if h else i for i, h in enumerate(heads)])
    counts = DependencyCounts(2)
    counts.add(target[:2], HEADS[:2], RELS[:2])  # two batches
    counts.add(target[2:], HEADS[2:], RELS[2:])
    r = counts.result(labelled=True)
    for relation in ("det", "nsubj", "advmod", "amod", ANY):
        assert r[relation, D2H]["accuracy"][0] == 100.0
    assert r["det", D2H]["gain"][0] == 50.0 and r[ANY, D2H]["gain"][0] == pytest.approx(100 - 500 / 7)
    # head 1 (always word 0): no head is word 0, so dependent->head is never right; head->dependent is
    # right where the dependent is word 0: both det pairs (the, a) and one nsubj pair of 3 (dogs)
    assert r["det", H2D]["accuracy"][1] == 100.0
    assert r["nsubj", H2D]["accuracy"][1] == pytest.approx(100 / 3)
    assert r[ANY, D2H]["accuracy"][1] == 0.0
    assert r["obj", D2H]["n"] == 0 and torch.isnan(r["obj", D2H]["accuracy"]).all()


CONLLU = """# sent_id = 1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tDog\tdog\tNOUN\tNN\t_\t6\tnsubj:pass\t_\t_
3\t,\t,\tPUNCT\t,\t_\t2\tpunct\t_\t_
4-5\twasn't\t_\t_\t_\t_\t_\t_\t_\t_
4\twas\tbe\tAUX\tVBD\t_\t6\taux:pass\t_\t_
5\tn't\tnot\tPART\tRB\t_\t6\tadvmod\t_\t_
6\tseen\tsee\tVERB\tVBN\t_\t0\troot\t_\t_
7\tin\tin\tADP\tIN\t_\t8\tcase\t_\t_
8\t2019\t2019\tNUM\tCD\t_\t6\tobl\t_\t_
9\t.\t.\tPUNCT\t.\t_\t6\tpunct\t_\t_

1\t!\t!\tPUNCT\t.\t_\t0\troot\t_\t_

1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_

"""


def test_conllu_relations_punctuation_removed_words_normalised(tmp_path):
    path = tmp_path / "gold.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    data = load_dependency_data(str(path))
    assert data.words == [["the", "dog", "was", "n't", "seen", "in", "N"], ["yes"]]
    assert data.heads == [[2, 5, 5, 5, 0, 7, 5], [0]]
    assert data.relations == [["det", "nsubj", "aux", "advmod", "root", "case", "obl"], ["root"]]
    assert (data.n_punctuation, data.n_empty, data.numbers) == (3, 1, [1, 3])
    assert load_dependency_data("ptb-sample:dev", max_sentences=3).relations is None


# --------------------------------------------------------------------------------------------------
# models and the command


def test_analysis_of_a_model_with_a_pruned_head(tiny_model):
    from syntaxformer.parsing import load_model

    model, tokenizer, _ = load_model(tiny_model("tree-transformer"))
    model.prune_heads({0: [1]})
    report = analyse_model(
        model, tokenizer, {}, text="ptb-sample:test", dependencies=["ptb-sample:dev"], max_sentences=20, batch_size=8
    )
    assert report["text"]["source"] == "ptb-sample:test" and report["text"]["n_sentences"] == 20
    assert report["rare_word"]["frequency_source"].startswith("the analysed text")
    for grid in (
        report["importance"]["normalised"],
        report["confidence"],
        report["positional"]["previous"],
        report["dependencies"][0]["unlabelled_accuracy"],
    ):
        assert grid[0][1] is None and all(v is not None for row in grid[1:] for v in row) and grid[0][0] is not None
    assert report["pruned_heads"] == {"0": [1]}


def test_a_model_without_attention_weights_is_an_input_error():
    class NoAttention(torch.nn.Module):
        config = type("C", (), {"num_hidden_layers": 1, "num_attention_heads": 2})()

        def forward(self, input_ids, attention_mask, output_attentions=False):
            return type("O", (), {"attentions": None})()

    with pytest.raises(InputError, match="no attention weights"):
        attention_weights(
            NoAttention(), torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3), head_layout(NoAttention())
        )
    NoAttention.config.num_attention_heads = 0
    with pytest.raises(InputError, match="no attention heads"):
        head_layout(NoAttention())


def _run(argv):
    from syntaxformer.cli import main

    return main(argv)


def test_command_end_to_end_on_the_held_out_text(tiny_model, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(tiny_model("tree-transformer"), model)
    (model / "training.json").write_text(
        json.dumps(
            {
                "arguments": {
                    "corpus": "ptb-sample:dev",
                    "valid": None,
                    "valid_fraction": 0.05,
                    "mask_rate": 0.15,
                    "mask_replace": "bert",
                },
                "preset": "tiny",
                "seed": 0,
            }
        )
    )
    out = tmp_path / "out"
    assert (
        _run(
            [
                "heads",
                "--model",
                str(model),
                "--out",
                str(out),
                "--dependencies",
                "ptb-sample:dev",
                "--max-sentences",
                "300",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "held-out 0.05 of ptb-sample:dev" in printed and "imp.norm" in printed
    report = json.loads((out / "heads.json").read_text())
    assert report["text"]["n_sentences"] == 96  # round(0.05 * 1921)
    assert report["rare_word"]["frequency_source"] == "training text of ptb-sample:dev (1825 sentences)"
    assert report["importance"]["n_masked_tokens"] > 0 and report["seed"] == 1
    for layer in report["importance"]["normalised"]:  # unit l2 norm per layer
        assert sum(v * v for v in layer) == pytest.approx(1.0, abs=1e-3)
    dep = report["dependencies"][0]
    assert (dep["source"], dep["labelled"], dep["n_sentences"]) == ("ptb-sample:dev", False, 300)
    assert [g["relation"] for g in dep["groups"]] == [ANY, ANY]
    assert len(report["syntactic"]["best"]) == 3 and report["protocol"]["importance"].startswith("I = ")
    index = (out / "index.html").read_text()
    for stem in ("importance", "confidence", "positional", "syntactic", "rare_word"):
        assert (out / f"{stem}.png").stat().st_size > 0 and (out / f"{stem}.svg").is_file()
        assert f'src="{stem}.png"' in index


def test_command_with_wordpiece_structformer_and_conllu(tiny_model, tmp_path, capsys):
    gold = tmp_path / "gold.conllu"
    gold.write_text(CONLLU * 3, encoding="utf-8")
    out = tmp_path / "out"
    assert (
        _run(
            [
                "heads",
                "--model",
                str(tiny_model("structformer", "wordpiece")),
                "--out",
                str(out),
                "--dependencies",
                str(gold),
                "--max-sentences",
                "30",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["text"]["source"].startswith("ptb-sample:dev (the model's held-out text is unknown)")
    assert summary["text"]["n_split_words"] > 0
    report = json.loads((out / "heads.json").read_text())
    dep = report["dependencies"][0]
    assert dep["labelled"] and dep["n_sentences"] == 6 and dep["n_skipped_empty"] == 3
    relations = {g["relation"] for g in dep["groups"]}
    assert {"nsubj", "obj", "amod", "advmod", "det", "case", "nmod", "aux", ANY} <= relations
    det = next(g for g in dep["groups"] if g["relation"] == "det" and g["direction"] == D2H)
    assert (det["n"], det["baseline_offset"], det["baseline"]) == (3, 1, 100.0)


@pytest.mark.parametrize(
    "argv,where",
    [
        (["--model", "{tmp}/nothing"], "nothing: not a model folder"),
        (["--dependencies", "{tmp}/missing.conllu"], "missing.conllu"),
        (["--corpus", "{tmp}/empty.txt"], "empty.txt"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(argv, where, tiny_model, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--model" not in argv:
        argv += ["--model", str(tiny_model("tree-transformer"))]
    assert _run(["heads", "--out", str(tmp_path / "out"), "--max-sentences", "5", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("syntaxformer heads: error:") and where in err
