"""``syntaxformer parse`` end to end, in process (``syntaxformer.cli.main``), on untrained ``tiny``
models (the ``tiny_model`` fixture): input sources, output files, decoders, errors."""

from __future__ import annotations

import io
import json
import sys

import conllu
import numpy as np
import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.data.dependency import read_conllu
from syntaxformer.data.treebank import parse_bracketed
from syntaxformer.decoding.dependency import is_tree
from syntaxformer.decoding.spans import labelled_spans, spans_to_tree, split_by_distance, with_preterminals
from syntaxformer.decoding.tree_transformer import OFFICIAL_DESCEND_THRESHOLD, algorithm1, single_layer
from syntaxformer.parsing import load_model, model_structures

torch.set_num_threads(1)

#: Raw text as a user gives it: casing, numbers, a blank line (not a sentence: the empty tree ``()``
#: keeps its place), a 1-word line.
TEXT = (
    "The Company earned $ 3.5 billion in 1989 .\n"
    "\n"
    "  Pierre   Vinken will join the board  \n"
    "Yes\n"
    "Stocks fell sharply on Friday after the Fed raised rates\n"
)
WORDS = [line.split() for line in TEXT.splitlines() if line.strip()]
#: Per input line its words (the blank line: none), what trees.txt's leaves give line by line.
LINES = [line.split() for line in TEXT.splitlines()]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _trees(out_dir):
    return parse_bracketed((out_dir / "trees.txt").read_text(encoding="utf-8"), str(out_dir / "trees.txt"))


def _spans(tree) -> set:
    return {(i, j) for i, j, _ in labelled_spans(tree) if j - i >= 2}


@pytest.fixture(scope="module")
def tt(tiny_model):
    return tiny_model("tree-transformer")


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "sentences.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ptb_text(tmp_path_factory, ptb_gold):
    """The first 60 ptb-sample sentences as a text file, and their words."""
    words = [t.leaves() for t in ptb_gold[:60]]
    path = tmp_path_factory.mktemp("input") / "ptb60.txt"
    path.write_text("".join(" ".join(w) + "\n" for w in words), encoding="utf-8")
    return path, words


# ------------------------------------------------------------------------------------------------
# input sources


def test_parse_text_file(capsys, tt, text_file, tmp_path):
    code, out, err = _run(capsys, "parse", "--model", tt, "--input", text_file, "--out", tmp_path, "--draw")
    assert code == 0, err
    assert all(w in out for words in WORDS for w in words)  # --draw prints the trees' words
    lines = (tmp_path / "trees.txt").read_text().splitlines()
    assert len(lines) == len(LINES) == 5 and lines[1] == "()"  # the blank line keeps its place
    trees = _trees(tmp_path)
    assert [t.leaves() for t in trees] == LINES  # original casing and numbers kept
    assert not (tmp_path / "dependencies.conllu").exists()
    assert "parsed 4 sentences" in out and str(tmp_path / "trees.txt") in out


def test_parse_stdin(capsys, monkeypatch, tt, text_file, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.StringIO(TEXT))
    code, out, err = _run(capsys, "parse", "--model", tt, "--input", "-", "--out", tmp_path / "a", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["data"] == "<stdin>" and summary["n_sentences"] == 4 and summary["seed"] == 0
    assert summary["n_blank_lines"] == 1
    assert [t.leaves() for t in _trees(tmp_path / "a")] == LINES
    # the same text from a file gives the same trees
    assert _run(capsys, "parse", "--model", tt, "--input", text_file, "--out", tmp_path / "b")[0] == 0
    assert (tmp_path / "a" / "trees.txt").read_text() == (tmp_path / "b" / "trees.txt").read_text()


def test_parse_ptb_sample_treebank_then_evaluate(capsys, tt, ptb_gold, tmp_path):
    """All 3,914 ptb-sample sentences; evaluate reads the output back against the gold trees."""
    code, _, err = _run(
        capsys,
        "parse",
        "--model",
        tt,
        "--treebank",
        "ptb-sample",
        "--out",
        tmp_path,
        "--min-layer",
        "1",
        "--threshold",
        "0.75",
    )
    assert code == 0, err
    trees = _trees(tmp_path)
    assert len(trees) == len(ptb_gold) == 3914
    assert all(t.leaves() == g.leaves() for t, g in zip(trees, ptb_gold))
    code, out, err = _run(capsys, "evaluate", "--pred", tmp_path / "trees.txt", "--gold", "ptb-sample", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["n_sentences"] == 3914
    for key in ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1"):
        assert 0 < report[key] < 100
    assert set(report["label_recall"]) >= {"NP", "VP", "PP"}


# ------------------------------------------------------------------------------------------------
# decoders


def test_layer_gives_binary_trees_equal_to_single_layer(capsys, tt, ptb_text, tmp_path):
    path, words = ptb_text
    model, tokenizer, _ = load_model(tt)
    structures = model_structures(model, tokenizer, words)
    for layer in (0, 2):
        out_dir = tmp_path / str(layer)
        code, _, err = _run(
            capsys, "parse", "--model", tt, "--input", path, "--out", out_dir, "--layer", layer, "--json"
        )
        assert code == 0, err
        rows = json.loads((out_dir / "structures.json").read_text())
        for w, s, tree, row in zip(words, structures, _trees(out_dir), rows, strict=True):
            assert tree.leaves() == w and row["words"] == w
            assert all(len(node) == 2 for node in tree.subtrees() if node.height() > 2)  # binary over the preterminals
            np.testing.assert_allclose(row["link_probs"], s.link_probs, atol=1e-6)
            assert _spans(tree) == single_layer(s.link_probs[layer]) == single_layer(row["link_probs"][layer])


@pytest.mark.parametrize("rule, min_layer", [("paper", 1), ("official", 0)])
def test_algorithm1_equals_decoder_on_structures_json(capsys, tt, ptb_text, tmp_path, rule, min_layer):
    """Threshold 0.75 on the untrained model: its top layer never breaks (links > 0.8), layer 1
    partly, layer 0 always (links ~0.5); so min layer 1 leaves flat constituents, and min layer 0
    with the public code's 0.7 rule changes where some children split."""
    path, words = ptb_text
    code, _, err = _run(
        capsys,
        "parse",
        "--model",
        tt,
        "--input",
        path,
        "--out",
        tmp_path,
        "--json",
        "--min-layer",
        min_layer,
        "--threshold",
        "0.75",
        "--descend-rule",
        rule,
    )
    assert code == 0, err
    rows = json.loads((tmp_path / "structures.json").read_text())
    descend = OFFICIAL_DESCEND_THRESHOLD if rule == "official" else None
    flat = differ = 0
    for w, tree, row in zip(words, _trees(tmp_path), rows, strict=True):
        a = np.array(row["link_probs"])
        assert a.shape == (3, len(w) - 1)
        expected = algorithm1(a, threshold=0.75, min_layer=min_layer, descend_threshold=descend)
        assert tree == with_preterminals(spans_to_tree(w, expected))
        flat += any(len(node) > 2 for node in tree.subtrees())
        differ += tree != with_preterminals(spans_to_tree(w, algorithm1(a, threshold=0.75, min_layer=min_layer)))
    if rule == "paper":
        assert flat > 0 and differ == 0  # flat (no break point down to layer 1) constituents
    else:
        assert flat == 0 and differ > 0  # the 0.7 rule changed some trees


def test_layer_out_of_range_and_layer_with_min_layer(capsys, tt, text_file, tmp_path):
    for argv in (["--layer", "3"], ["--layer", "-4"], ["--min-layer", "3"], ["--layer", "0", "--min-layer", "1"]):
        code, out, err = _run(capsys, "parse", "--model", tt, "--input", text_file, "--out", tmp_path, *argv)
        assert code == 1, argv
        assert err.startswith("syntaxformer parse: error:") and err.count("\n") == 1, err
        assert argv[0] in err or argv[-2] in err
    assert not (tmp_path / "trees.txt").exists()


# ------------------------------------------------------------------------------------------------
# StructFormer


@pytest.mark.parametrize("decoder", ["mst", "argmax"])
def test_structformer_writes_trees_and_conllu(capsys, tiny_model, ptb_text, tmp_path, decoder):
    sf = tiny_model("structformer")
    path, words = ptb_text
    code, out, err = _run(
        capsys, "parse", "--model", sf, "--input", path, "--out", tmp_path, "--dependency", decoder, "--json"
    )
    assert code == 0, err
    trees = _trees(tmp_path)
    assert [t.leaves() for t in trees] == words
    rows = json.loads((tmp_path / "structures.json").read_text())
    for w, tree, row in zip(words, trees, rows, strict=True):
        assert len(row["distances"]) == len(w) - 1 and len(row["heights"]) == len(w)
        assert _spans(tree) == split_by_distance(row["distances"])  # top-down split, binary
    conllu_path = tmp_path / "dependencies.conllu"
    assert str(conllu_path) in json.loads(out)["files"]
    parsed = conllu.parse(conllu_path.read_text(encoding="utf-8"))
    ours = read_conllu(conllu_path)
    assert len(parsed) == len(ours) == len(words)
    for w, tokens, sentence in zip(words, parsed, ours):
        assert [t["form"] for t in tokens] == w == list(sentence.words)
        heads = [t["head"] for t in tokens]
        assert heads == list(sentence.heads)
        assert all(0 <= h <= len(w) for h in heads)
        if decoder == "mst":  # a well-formed tree: one root, no cycle
            assert heads.count(0) == 1 and is_tree(heads, single_root=True)
            assert tokens.to_tree().token["id"] == heads.index(0) + 1


def test_structformer_rejects_layer(capsys, tiny_model, text_file, tmp_path):
    code, _, err = _run(
        capsys, "parse", "--model", tiny_model("structformer"), "--input", text_file, "--out", tmp_path, "--layer", "0"
    )
    assert code == 1 and "--layer" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------------------
# bad input: one line naming the path, exit status 1, no traceback


def test_missing_model_folder(capsys, text_file, tmp_path):
    missing = tmp_path / "no-model"
    code, _, err = _run(capsys, "parse", "--model", missing, "--input", text_file, "--out", tmp_path)
    assert code == 1 and str(missing) in err and err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("content", ["", "\n  \n\n"])
def test_empty_or_missing_input_file(capsys, tt, tmp_path, content):
    empty = tmp_path / "empty.txt"
    empty.write_text(content)
    code, _, err = _run(capsys, "parse", "--model", tt, "--input", empty, "--out", tmp_path / "o")
    assert code == 1 and str(empty) in err and err.count("\n") == 1
    missing = tmp_path / "absent.txt"
    code, _, err = _run(capsys, "parse", "--model", tt, "--input", missing, "--out", tmp_path / "o")
    assert code == 1 and str(missing) in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_an_output_folder_that_cannot_be_made(capsys, tt, text_file, tmp_path):
    """``--out`` naming a file, or a folder inside a file: one line naming the path, status 1."""
    a_file = tmp_path / "trees.txt"
    a_file.write_text("keep me\n")
    code, out, err = _run(capsys, "parse", "--model", tt, "--input", text_file, "--out", a_file)
    assert (code, out) == (1, "")
    assert err == f"syntaxformer parse: error: {a_file}: exists and is not a folder\n"
    code, out, err = _run(capsys, "parse", "--model", tt, "--input", text_file, "--out", a_file / "out")
    assert (code, out) == (1, "")
    assert err == f"syntaxformer parse: error: {a_file / 'out'}: Not a directory\n"
    assert a_file.read_text() == "keep me\n"


def test_an_os_error_without_a_path_is_not_hidden(monkeypatch, tt, text_file, tmp_path):
    """Only file-system errors about a named path are user input; any other OSError propagates."""

    def fail(*args, **kwargs):
        raise OSError("not about a path")

    monkeypatch.setattr("syntaxformer.workflows.parse.write_outputs", fail)
    with pytest.raises(OSError, match="^not about a path$"):
        main(["parse", "--model", str(tt), "--input", str(text_file), "--out", str(tmp_path / "o")])


def test_batch_size_zero(capsys, tt, text_file, tmp_path):
    code, _, err = _run(capsys, "parse", "--model", tt, "--input", text_file, "--out", tmp_path, "--batch-size", "0")
    assert code == 1 and "--batch-size" in err and err.count("\n") == 1


def test_empty_stdin(capsys, monkeypatch, tt, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = _run(capsys, "parse", "--model", tt, "--input", "-", "--out", tmp_path)
    assert code == 1 and "<stdin>" in err and err.count("\n") == 1
