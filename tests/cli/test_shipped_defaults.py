"""``show``, ``heads`` and ``prune`` without ``--model``: each uses the default parser shipped in the
package (:func:`syntaxformer.pretrained.pretrained_folder`) and, where it decodes trees, that folder's
saved decoder settings: the ``"decoder"`` of its ``report.json``. A shipped parser named by its name
likewise decodes with its report's settings: ``tree-transformer-ptb``'s Algorithm 1, threshold 0.8,
minimum layer 0, not the decoder's documented default minimum layer (2).

The expected values come from the shipped ``report.json`` read here, and from the same command run with
the folder and settings given explicitly."""

from __future__ import annotations

import json

import pytest

import syntaxformer.workflows.prune as prune_module
from syntaxformer.cli import main
from syntaxformer.decoding.tree_transformer import DEFAULT_MIN_LAYER
from syntaxformer.pretrained import pretrained_folder

SENTENCE = "the company said it would sell its shares"


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def shipped():
    folder = pretrained_folder()
    return folder, json.loads((folder / "report.json").read_text())["decoder"]


@pytest.fixture(scope="module")
def shipped_tree_transformer():
    """A shipped Tree Transformer, named by its name: its report's minimum layer is not the decoder's default."""
    folder = pretrained_folder("tree-transformer-ptb")
    saved = json.loads((folder / "report.json").read_text())["decoder"]
    # what the shipped report records, and why the defaults must come from it
    assert (saved["min_layer"], saved["threshold"], saved["layer"]) == (0, 0.8, None)
    assert DEFAULT_MIN_LAYER == 2
    return folder, saved


def _decoder_flags(saved: dict) -> list[str]:
    """The command-line flags that give the decoder settings of a report explicitly."""
    flags = {"threshold": "--threshold", "min_layer": "--min-layer", "layer": "--layer", "dependency": "--dependency"}
    return [part for key, flag in flags.items() if saved.get(key) is not None for part in (flag, str(saved[key]))]


def test_show_defaults_to_the_shipped_parser_and_its_decoder(shipped, tmp_path, capsys):
    folder, saved = shipped
    default = _json(capsys, ["show", SENTENCE, "--out", str(tmp_path / "a"), "--layers", "0", "--json"])
    assert default["model"] == str(folder)
    explicit = _json(
        capsys,
        ["show", SENTENCE, "--model", str(folder), *_decoder_flags(saved), "--out", str(tmp_path / "b")]
        + ["--layers", "0", "--json"],
    )
    # the default StructFormer's report: the distance split, dependency heads by the authors' argmax rule
    assert (saved["threshold"], saved["min_layer"], saved["dependency"]) == (0.8, None, "argmax")
    assert explicit["decoder"] == default["decoder"] == "top-down split at the largest syntactic distance"
    assert explicit["sentences"][0]["tree"] == default["sentences"][0]["tree"]
    assert (tmp_path / "a" / "index.html").is_file() and (tmp_path / "a" / "s1-tree.png").is_file()


def test_show_of_a_shipped_tree_transformer_uses_its_minimum_layer(shipped_tree_transformer, tmp_path, capsys):
    folder, _ = shipped_tree_transformer
    argv = ["show", SENTENCE, "--layers", "0", "--json"]
    by_name = _json(capsys, [*argv, "--model", "tree-transformer-ptb", "--out", str(tmp_path / "a")])
    assert by_name["model"] == str(folder)
    assert "minimum layer 0" in by_name["decoder"] and "threshold 0.8" in by_name["decoder"]
    explicit = _json(capsys, [*argv, "--model", str(folder), "--min-layer", "0", "--out", str(tmp_path / "b")])
    assert explicit["decoder"] == by_name["decoder"]
    assert explicit["sentences"][0]["tree"] == by_name["sentences"][0]["tree"]


def test_heads_defaults_to_the_shipped_parser(shipped, tmp_path, capsys):
    folder, _ = shipped
    config = json.loads((folder / "config.json").read_text())
    summary = _json(capsys, ["heads", "--out", str(tmp_path), "--max-sentences", "3", "--json"])
    assert summary["model"] == str(folder)
    assert (summary["layers"], summary["heads"]) == (config["num_hidden_layers"], config["num_attention_heads"])
    assert summary["text"]["n_sentences"] == 3
    written = json.loads((tmp_path / "heads.json").read_text())
    assert written["model"] == str(folder)
    assert len(written["importance"]["normalised"]) == config["num_hidden_layers"]


@pytest.mark.slow  # ~35 s on the shared 2-core machine: two prune runs
def test_prune_of_a_shipped_parser_uses_its_decoder(shipped_tree_transformer, tmp_path, capsys, monkeypatch):
    """F1 on the first 5 trees of ptb-sample:dev only (prune scores the whole treebank at every point)."""
    folder, saved = shipped_tree_transformer
    real_load = prune_module.load_gold_trees
    monkeypatch.setattr(prune_module, "load_gold_trees", lambda treebank: real_load(treebank)[:5])
    common = ["--max-sentences", "3", "--step", "0.5", "--seeds", "0", "--json"]
    by_name = _json(capsys, ["prune", "--model", "tree-transformer-ptb", "--out", str(tmp_path / "a"), *common])
    assert by_name["model"] == str(folder)
    report = json.loads((tmp_path / "a" / "prune.json").read_text())
    assert report["model"] == str(folder)
    assert {k: report["decoder"][k] for k in saved} == saved  # min_layer 0, threshold 0.8, ...
    assert report["data"]["n_treebank_sentences"] == 5
    assert report["orders"]["importance"]["points"][0]["n_removed"] == 0
    assert "sentence_f1" in report["orders"]["importance"]["points"][0]
    explicit = _json(
        capsys, ["prune", "--model", str(folder), "--min-layer", "0", "--out", str(tmp_path / "b"), *common]
    )
    assert explicit["orders"] == by_name["orders"]


def test_prune_defaults_to_the_shipped_parser(shipped, tmp_path, capsys, monkeypatch):
    folder, saved = shipped
    real_load = prune_module.load_gold_trees
    monkeypatch.setattr(prune_module, "load_gold_trees", lambda treebank: real_load(treebank)[:5])
    default = _json(
        capsys, ["prune", "--out", str(tmp_path), "--max-sentences", "3", "--step", "0.5", "--seeds", "0", "--json"]
    )
    assert default["model"] == str(folder)
    report = json.loads((tmp_path / "prune.json").read_text())
    assert {k: report["decoder"][k] for k in saved} == saved and "sentence_f1" in report["orders"]["importance"][
        "points"
    ][0]
