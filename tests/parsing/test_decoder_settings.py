"""Decoding settings travel with the model: what ``induce`` scored is what ``parse --model`` gives.

A model trained by ``induce`` is saved with the decoder settings it was scored with
(``OUT/model/decoder.json``); ``parse --model``, ``show``, ``prune`` and the Python API decode with
them unless a flag says otherwise. Each test trains a tiny model for 3 steps on ptb-sample's first
files, lets ``induce`` score the test half, then parses the test half again through ``parse --model``
and scores those trees with ``evaluate``: the sentence F1 must be exactly the report's.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.data.embedded import ptb_sample_members
from syntaxformer.data.preprocess import load_gold_trees
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS
from syntaxformer.parsing import resolve_decoder_options
from syntaxformer.structures import DECODER_FILE, DecoderOptions, save_decoder_options, saved_decoder_options

torch.set_num_threads(1)

#: three steps of the tiny Tree Transformer
TINY = [
    *("--architecture", "tree-transformer", "--preset", "tiny", "--max-steps", "3"),
    *("--threads", "1", "--quiet", "--curve-treebank", "none"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The words of ptb-sample's first 4 files, a raw-text training corpus (seconds to train on)."""
    folder = tmp_path_factory.mktemp("corpus")
    mrg = folder / "small.mrg"
    mrg.write_text("\n".join(text for _, text in ptb_sample_members("combined")[:4]), encoding="utf-8")
    text = folder / "small.txt"
    text.write_text("".join(" ".join(t.leaves()) + "\n" for t in load_gold_trees(mrg)), encoding="utf-8")
    return text


def _main(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return code, captured.out


def _parse_and_score(capsys, model, out, *flags) -> float:
    """Sentence F1 (0-100) of ``parse --model MODEL --treebank ptb-sample:test`` scored by ``evaluate``."""
    _main(capsys, "parse", "--model", model, "--treebank", "ptb-sample:test", "--out", out, *flags)
    _, printed = _main(capsys, "evaluate", "--pred", out / "trees.txt", "--gold", "ptb-sample:test", "--json")
    return json.loads(printed)["sentence_f1"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, name, flags",
    [
        ("tree-transformer", "tree_transformer", []),  # the recipe's minimum layer 0
        ("tree-transformer", "tree_transformer", ["--threshold", "0.6", "--descend-rule", "official"]),
        ("structformer", "structformer", ["--dependency", "argmax"]),
        ("on-lstm", "on_lstm", ["--layer", "0"]),
    ],
)
def test_parse_model_gives_the_f1_induce_reported(capsys, corpus, tmp_path, model, name, flags):
    if model not in MODELS:
        pytest.skip(f"{model} is not registered")
    out = tmp_path / "induce"
    _main(capsys, "induce", *TINY, "--architecture", model, "--corpus", corpus, "--out", out, *flags)
    report = json.loads((out / "report.json").read_text())
    saved = json.loads((out / "model" / DECODER_FILE).read_text())
    assert saved == report["decoder"]
    expected = report["parts"]["test"][name]["sentence_f1"]
    assert _parse_and_score(capsys, out / "model", tmp_path / "parsed") == expected
    if model == "tree-transformer" and not flags:
        assert saved["min_layer"] == 0
        # the bug this guards: without the saved setting, parse fell back to minimum layer 2 (tiny: 3
        # layers) and scored another number; a flag still overrides the saved setting
        other = _parse_and_score(capsys, out / "model", tmp_path / "m2", "--min-layer", "2")
        assert other != expected


@pytest.mark.slow
def test_rescore_scores_the_trained_model_again_with_other_settings(capsys, corpus, tmp_path):
    """``induce --rescore --min-layer 2`` on an ``induce`` output: no training; the model's trees are those
    of ``parse --min-layer 2`` (and ``parse --model`` now gives them by default); the baselines, the
    training record and the weights are the run's (the untrained control is decoded with the new settings
    too); ``--min-layer 0`` gives the first report back, untrained control included."""
    out = tmp_path / "induce"
    _main(capsys, "induce", "--corpus", corpus, "--out", out, *TINY)
    first = json.loads((out / "report.json").read_text())
    weights = (out / "model" / "model.safetensors").read_bytes()
    m2 = _parse_and_score(capsys, out / "model", tmp_path / "m2", "--min-layer", "2")
    _main(capsys, "induce", "--rescore", "--out", out, "--min-layer", "2", "--threads", "1")
    second = json.loads((out / "report.json").read_text())
    assert (second["decoder"]["min_layer"], second["rescored_from"]) == (2, first["decoder"])
    assert second["parts"]["test"]["tree_transformer"]["sentence_f1"] == m2
    assert _parse_and_score(capsys, out / "model", tmp_path / "saved") == m2
    for part in ("test", "dev", "all"):
        for system in ("right_branching", "random", "balanced"):
            assert second["parts"][part][system] == first["parts"][part][system]
    assert second["training"] == first["training"] and second["minutes"]["train"] == first["minutes"]["train"]
    assert (out / "model" / "model.safetensors").read_bytes() == weights
    _main(capsys, "induce", "--rescore", "--out", out, "--min-layer", "0", "--threads", "1")
    third = json.loads((out / "report.json").read_text())
    assert third["parts"] == first["parts"] and third["decoder"] == first["decoder"]


def test_rescore_of_a_folder_without_an_induce_report_is_a_one_line_error(capsys, tmp_path):
    assert main(["induce", "--rescore", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "not an induce output folder" in err and str(tmp_path) in err and "\n" not in err
    (tmp_path / "report.json").write_text(json.dumps({"model": "tree-transformer", "seed": 0}))
    assert main(["induce", "--rescore", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "not an induce report (no decoder, data, training, preset, minutes)" in err and "\n" not in err
    assert main(["induce", "--rescore", "--out", str(tmp_path), "--max-steps", "5", "--lr", "0.1"]) == 1
    err = capsys.readouterr().err.strip()
    assert "--rescore trains nothing: drop --max-steps, --lr" in err and "\n" not in err
    assert main(["induce", "--rescore", "--out", str(tmp_path), "--bf16"]) == 1
    assert "--rescore trains nothing: drop --bf16" in capsys.readouterr().err


def test_saved_settings_round_trip_and_flags_override(tmp_path):
    options = DecoderOptions(threshold=0.7, min_layer=1, descend_threshold=0.7, dependency="argmax")
    save_decoder_options(tmp_path, options)
    assert saved_decoder_options(tmp_path) == (options, str(tmp_path / DECODER_FILE))
    assert resolve_decoder_options(tmp_path) == options
    # a chosen layer (single-layer decoder) replaces the saved minimum layer, and the other way round
    assert resolve_decoder_options(tmp_path, {"layer": 2}) == replace(options, layer=2, min_layer=None)
    save_decoder_options(tmp_path, DecoderOptions(layer=1))
    assert resolve_decoder_options(tmp_path, {"min_layer": 0}) == DecoderOptions(min_layer=0)
    # full options are used exactly as given
    assert resolve_decoder_options(tmp_path, DecoderOptions()) == DecoderOptions()


def test_folder_without_settings_uses_its_report_or_the_defaults(tmp_path, caplog):
    model = tmp_path / "model"
    model.mkdir()
    caplog.set_level("INFO")
    assert saved_decoder_options(model) == (DecoderOptions(), "the defaults")
    assert "documented defaults" in caplog.text
    # an induce output written before decoder.json existed: the report beside the model folder
    (tmp_path / "report.json").write_text(json.dumps({"decoder": DecoderOptions(min_layer=0).to_dict()}))
    assert saved_decoder_options(model) == (DecoderOptions(min_layer=0), str(tmp_path / "report.json"))


def test_the_shipped_parser_reads_its_report():
    from syntaxformer.pretrained import model_or_pretrained, pretrained_folder

    report = json.loads((pretrained_folder() / "report.json").read_text())
    folder, options = model_or_pretrained(None)
    assert folder == pretrained_folder()
    assert options == DecoderOptions.from_dict(report["decoder"])
    assert options.dependency == "argmax"  # the authors' rule
    named = pretrained_folder("tree-transformer-ptb")
    folder, options = model_or_pretrained("tree-transformer-ptb")
    assert folder == named and options.min_layer == 0  # its report's, not the decoder's default (2)


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"threshold": 0.8, "beam": 3}', "unknown decoder setting"),
        ('{"min_layer": "two"}', r"bad decoder setting\(s\): min_layer 'two' \(expected a whole number or null\)$"),
        (
            '{"threshold": true, "dependency": "eisner"}',
            r"bad decoder setting\(s\): threshold True \(expected a number\); dependency 'eisner' \(expected mst or"
            r" argmax\)$",
        ),
        ('{"layer": 1, "min_layer": 0}', "exclude each other"),
        ("[1, 2]", "expected a JSON object"),
        ("{", "unreadable JSON"),
    ],
)
def test_bad_settings_file_is_a_one_line_error(tmp_path, content, message):
    (tmp_path / DECODER_FILE).write_text(content)
    with pytest.raises(InputError, match=message) as error:
        saved_decoder_options(tmp_path)
    assert str(tmp_path / DECODER_FILE) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.slow
def test_show_and_prune_use_the_settings_induce_saved(capsys, corpus, tmp_path, monkeypatch):
    """``show --model OUT/model`` and ``prune --model OUT/model`` on an ``induce`` output decode with the
    settings ``induce`` scored with (the recipe's minimum layer 0 and a chosen threshold), not the
    decoder's defaults (minimum layer 2 on this 3-layer model, threshold 0.8)."""
    import syntaxformer.workflows.prune as prune_module

    out = tmp_path / "induce"
    _main(capsys, "induce", "--corpus", corpus, "--out", out, *TINY, "--threshold", "0.7")
    report = json.loads((out / "report.json").read_text())
    assert (report["decoder"]["min_layer"], report["decoder"]["threshold"]) == (0, 0.7)
    _, printed = _main(
        capsys,
        "show",
        "the cat sat on the mat",
        "--model",
        out / "model",
        "--out",
        tmp_path / "f",
        "--layers",
        "0",
        "--json",
    )
    assert "threshold 0.7, minimum layer 0" in json.loads(printed)["decoder"]
    real_load = prune_module.load_gold_trees
    monkeypatch.setattr(prune_module, "load_gold_trees", lambda treebank: real_load(treebank)[:5])
    _main(
        capsys,
        "prune",
        "--model",
        out / "model",
        "--out",
        tmp_path / "p",
        "--max-sentences",
        "3",
        "--step",
        "0.5",
        "--seeds",
        "0",
        "--json",
    )
    pruned = json.loads((tmp_path / "p" / "prune.json").read_text())
    assert pruned["decoder"] == report["decoder"]
