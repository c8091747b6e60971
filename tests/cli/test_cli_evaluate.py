"""``syntaxformer evaluate`` and ``syntaxformer baselines`` through ``syntaxformer.cli.main``."""

from __future__ import annotations

import json

import pytest

from syntaxformer.cli import main
from syntaxformer.data import ptb_sample_members
from syntaxformer.data.dependency import DependencySentence, read_dependencies, write_conllu
from syntaxformer.decoding.spans import spans_to_tree, to_bracketed
from syntaxformer.evaluation.baselines import left_chain, right_branching


def right_branching_lines(trees) -> list[str]:
    return [to_bracketed(spans_to_tree(t.leaves(), right_branching(len(t.leaves())))) for t in trees]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The first 3 files of ptb-sample (gold .mrg and .dp), and right-branching predictions."""
    from syntaxformer.data import load_gold_trees

    folder = tmp_path_factory.mktemp("small")
    for kind in ("combined", "dependency"):
        for name, text in ptb_sample_members(kind)[:3]:
            (folder / name.split("/")[1]).write_text(text)
    gold = load_gold_trees(folder / "wsj_000*.mrg")
    pred = folder / "pred.txt"
    pred.write_text("\n".join(right_branching_lines(gold)) + "\n")
    return folder, gold, pred


def test_evaluate_right_branching_on_ptb_sample(ptb_gold, tmp_path, capsys):
    pred = tmp_path / "right.txt"
    pred.write_text("\n".join(right_branching_lines(ptb_gold)) + "\n")
    assert main(["evaluate", "--pred", str(pred), "--gold", "ptb-sample", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)  # exactly one JSON object
    assert round(result["sentence_f1"], 2) == 39.91
    assert round(result["corpus_f1"], 2) == 35.75
    assert result["n_sentences"] == 3914 and result["task"] == "constituency"
    assert set(result) >= {
        "sentence_f1",
        "corpus_f1",
        "wsj10_sentence_f1",
        "wsj10_corpus_f1",
        "n_sentences",
        "label_recall",
        "mean_depth",
        "protocol",
        "seed",
    }


def test_evaluate_text_report(small, capsys):
    folder, gold, pred = small
    assert main(["evaluate", "--pred", str(pred), "--gold", str(folder / "*.mrg"), "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "protocol:" in out and "PRPN sentence-level" in out
    assert f"sentences:  {len(gold)} (" in out and "seed:       7" in out
    assert "sentence-level" in out and "NP" in out and "mean depth" in out


def test_evaluate_count_mismatch(small, tmp_path, capsys):
    folder, gold, pred = small
    short = tmp_path / "short.txt"
    short.write_text("\n".join(pred.read_text().splitlines()[:5]) + "\n")
    assert main(["evaluate", "--pred", str(short), "--gold", str(folder / "*.mrg")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "sentence 6" in err
    assert f"the prediction has 5 sentences but the gold has {len(gold)}" in err


def test_evaluate_word_mismatch(small, tmp_path, capsys):
    folder, gold, pred = small
    lines = pred.read_text().splitlines()
    lines[1] = lines[1].replace("vinken", "vincent", 1)  # sentence 2: "mr. vinken is ..."
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("\n".join(lines) + "\n")
    assert main(["evaluate", "--pred", str(wrong), "--gold", str(folder / "*.mrg")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "sentence 2: word 2 differs: predicted 'vincent', gold 'vinken'" in err
    assert str(wrong) in err


#: the punctuation tags of ptb-sample's first three .dp files (every other tag there is one of the 36 word tags)
PUNCTUATION_TAGS = {",", ".", ":", "``", "''"}


def _chain_counts(paths) -> tuple[int, int, int]:
    """Counted here, apart from the evaluator: over the sentences of ``.dp`` files (word TAB tag TAB
    head), punctuation removed (a head that is punctuation climbs to its first non-punctuation
    ancestor), how many words the left chain (word i headed by word i + 1, the last by the root)
    heads correctly, how many of its edges are gold edges undirected, and how many words are scored."""
    correct = undirected = tokens = 0
    for path in paths:
        for block in path.read_text().strip().split("\n\n"):
            rows = [line.split("\t") for line in block.splitlines()]
            heads = [int(h) for _, _, h in rows]
            kept = [i + 1 for i, (_, tag, _) in enumerate(rows) if tag not in PUNCTUATION_TAGS]
            number = {old: new for new, old in enumerate(kept, start=1)}
            gold = []
            for i in kept:
                h = heads[i - 1]
                while h != 0 and h not in number:
                    h = heads[h - 1]
                gold.append(0 if h == 0 else number[h])
            n = len(gold)
            chain = [i + 1 for i in range(1, n)] + [0]
            correct += sum(g == c for g, c in zip(gold, chain))
            gold_edges = {frozenset((i, h)) for i, h in enumerate(gold, start=1)}
            undirected += sum(frozenset((i, h)) in gold_edges for i, h in enumerate(chain, start=1))
            tokens += n
    return correct, undirected, tokens


def test_evaluate_dependency(small, tmp_path, capsys):
    folder, _, _ = small
    gold = read_dependencies(folder)
    full = tmp_path / "gold.conllu"
    write_conllu(gold, full)
    assert main(["evaluate", "--pred", str(full), "--gold", str(folder / "*.dp"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["uas"], result["uuas"], result["task"]) == (100.0, 100.0, "dependency")
    # a left chain over the punctuation-free words, scored by hand
    chain = []
    for g in gold:
        words = [w for w, p in zip(g.words, g.punct) if not p]
        chain.append(
            DependencySentence(tuple(words), ("X",) * len(words), tuple(left_chain(len(words))), (False,) * len(words))
        )
    pred = tmp_path / "chain.conllu"
    write_conllu(chain, pred)
    assert main(["evaluate", "--pred", str(pred), "--gold", str(folder / "*.dp"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    correct, undirected, tokens = _chain_counts([folder / f"wsj_000{k}.dp" for k in (1, 2, 3)])
    assert result["n_tokens"] == tokens and result["n_sentences"] == 33
    assert result["uas"] == pytest.approx(100 * correct / tokens, abs=1e-9)
    assert result["uuas"] == pytest.approx(100 * undirected / tokens, abs=1e-9)
    assert 0 < result["uas"] < result["uuas"] < 100
    # sentence 1 alone, by hand: "Pierre Vinken , 61 years old , will join the board as a nonexecutive
    # director Nov. 29 ." without its 3 punctuation tokens has 15 words with gold heads (renumbered)
    # 2 6 4 5 2 0 6 9 7 7 13 13 10 7 14; the left chain's 2 3 ... 15 0 agrees at words 1, 3, 4, 8 and 12
    # (UAS 5/15) and has 7 of the gold edges undirected: 1-2, 3-4, 4-5, 6-7, 8-9, 12-13, 14-15 (UUAS 7/15)
    one = tmp_path / "one.dp"
    one.write_text((folder / "wsj_0001.dp").read_text().split("\n\n")[0] + "\n")
    write_conllu(chain[:1], pred)
    assert main(["evaluate", "--pred", str(pred), "--gold", str(one), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_tokens"] == 15 and result["n_sentences"] == 1
    assert result["uas"] == pytest.approx(100 * 5 / 15) and result["uuas"] == pytest.approx(100 * 7 / 15)
    # a sentence with a missing token: exit 1 naming the sentence
    chain[1] = DependencySentence(
        chain[1].words[1:], chain[1].tags[1:], tuple(left_chain(len(chain[1].words) - 1)), chain[1].punct[1:]
    )
    write_conllu(chain, pred)
    assert main(["evaluate", "--pred", str(pred), "--gold", str(folder / "*.dp")]) == 1
    assert "sentence 2" in capsys.readouterr().err


def test_baselines_command(small, capsys):
    folder, gold, _ = small
    args = ["baselines", "--treebank", str(folder / "*.mrg"), "--dependencies", str(folder / "*.dp")]
    assert main(args + ["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"left_branching", "right_branching", "random", "balanced", "dependency"} <= set(result)
    assert set(result["dependency"]) == {"left_chain", "right_chain"}
    assert result["random"]["seeds"] == [0, 1, 2, 3, 4] and "std" in result["random"]
    assert result["right_branching"]["n_sentences"] == len(gold)
    assert main(args + ["--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "right-branching" in out and "±" in out and "left chain" in out
    assert "seeds 3, 4, 5, 6, 7" in out


def test_missing_prediction_file(capsys):
    assert main(["evaluate", "--pred", "/nonexistent/pred.txt", "--gold", "ptb-sample"]) == 1
    assert "/nonexistent/pred.txt" in capsys.readouterr().err
